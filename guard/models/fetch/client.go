package fetch

import (
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// DefaultClient is the client Fetch uses when Request.Client is nil: the
// proxy from the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), bounded
// connect, TLS and header waits, and no overall timeout, since a model
// takes as long as it takes; Request.StallTimeout ends a dead body.
func DefaultClient() *http.Client { return defaultClient() }

var defaultClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   20 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          4,
		ReadBufferSize:        256 << 10,
	}}
})

// tokenAllowed reports whether a bearer token may go to u: only over TLS,
// or to this machine (a test server, a local mirror).
func tokenAllowed(u *url.URL) bool {
	if u.Scheme == "https" {
		return true
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
