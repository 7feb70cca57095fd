package fetch_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/models/fetch"
)

// model returns n bytes that start like a GGUF file.
func model(n int) []byte {
	b := make([]byte, n)
	copy(b, "GGUF\x03\x00\x00\x00")
	x := uint32(2463534242)
	for i := 8; i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// counter is a test server that counts requests, Range requests and body
// bytes it sent.
type counter struct {
	*httptest.Server
	requests, ranges, sent atomic.Int64
}

// serve starts a server whose handler gets the request number (from 1).
func serve(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int64, c *counter)) *counter {
	t.Helper()
	c := &counter{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := c.requests.Add(1)
		if r.Header.Get("Range") != "" {
			c.ranges.Add(1)
		}
		h(&countingWriter{ResponseWriter: w, c: c}, r, n, c)
	}))
	t.Cleanup(c.Close)
	return c
}

type countingWriter struct {
	http.ResponseWriter
	c *counter
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.c.sent.Add(int64(n))
	return n, err
}

func (w *countingWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// content serves data with Range and If-Range support and an ETag.
func content(w http.ResponseWriter, r *http.Request, data []byte) {
	w.Header().Set("ETag", `"`+sum(data)[:16]+`"`)
	http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
}

// dropAfter sends the headers of the whole file, k bytes of it, and then
// drops the connection.
func dropAfter(w http.ResponseWriter, data []byte, k int) {
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("ETag", `"`+sum(data)[:16]+`"`)
	w.WriteHeader(http.StatusOK)
	w.Write(data[:k])
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

// request is a Request with test-sized timings.
func request(t *testing.T, urls ...string) fetch.Request {
	return fetch.Request{
		URLs:         urls,
		Dest:         filepath.Join(t.TempDir(), "m.gguf"),
		Backoff:      time.Millisecond,
		StallTimeout: 5 * time.Second,
	}
}

func mustFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, sha256 %s; want %d bytes, %s", path, len(got), sum(got)[:12], len(want), sum(want)[:12])
	}
}

func mustNotExist(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists (err %v), want it gone", p, err)
		}
	}
}

// newResponse is a 200 carrying data, for fake transports.
func newResponse(req *http.Request, data []byte) *http.Response {
	return &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{},
		Body:          io.NopCloser(bytes.NewReader(data)),
		ContentLength: int64(len(data)),
		Request:       req,
	}
}
