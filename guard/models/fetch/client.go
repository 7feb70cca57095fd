package fetch

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-guard/guard/manifest"
)

// DefaultClient is the client Fetch uses when Request.Client is nil: the
// proxy from the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), bounded
// connect, TLS and header waits, and no overall timeout, since a model
// takes as long as it takes; the rate watch (Request.MinRate) ends a dead one.
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

// tokenAllowed reports whether HF_TOKEN may go to u: only to
// huggingface.co and its subdomains, only over https. A mirror, plain
// http, even this machine never get it: a token is a secret of one
// account on one service.
func tokenAllowed(u *url.URL) bool {
	if u.Scheme != "https" {
		return false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	return host == "huggingface.co" || strings.HasSuffix(host, ".huggingface.co")
}

// maxRedirects bounds one request's chain of redirects, as Go's client
// does by default.
const maxRedirects = 10

// redirectError is a redirect guard will not follow: to plain http, in a
// loop, or one too many. It is the server's configuration, not a hiccup,
// so the url is not tried again.
type redirectError struct{ from, what string }

func (e *redirectError) Error() string { return e.from + ": refused " + e.what }

// withRedirectRules returns a copy of c that follows redirects by guard's
// rules. Go copies the Authorization header to a redirect on the same host
// whatever the scheme, so the token is set again for every hop by
// tokenAllowed alone; a redirect to plain http is refused unless it goes
// from this machine to this machine (a local mirror), and a loop ends at
// once.
func withRedirectRules(c *http.Client, token string) *http.Client {
	cc := *c
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		prev, to := via[len(via)-1].URL, req.URL.Redacted()
		fail := func(format string, args ...any) error {
			return &redirectError{from: via[0].URL.Redacted(), what: fmt.Sprintf(format, args...)}
		}
		if req.URL.Scheme == "http" && !(manifest.IsLoopback(prev.Hostname()) && manifest.IsLoopback(req.URL.Hostname())) {
			return fail("a redirect to plain http %s (allowed only from this machine to this machine)", to)
		}
		for _, v := range via {
			if v.URL.String() == req.URL.String() {
				return fail("a redirect loop (back to %s)", to)
			}
		}
		if len(via) >= maxRedirects {
			return fail("more than %d redirects (the last to %s)", maxRedirects, to)
		}
		authorize(req, token)
		return nil
	}
	return &cc
}

// authorize sets the bearer token on req where tokenAllowed says so, and
// removes one that must not go there.
func authorize(req *http.Request, token string) {
	req.Header.Del("Authorization")
	if token != "" && tokenAllowed(req.URL) {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}
