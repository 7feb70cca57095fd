package fetch_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/fetch/ranged"
)

// counter is a test server that counts requests, Range requests and body
// bytes it sent.
type counter struct {
	*httptest.Server
	requests, ranges, sent atomic.Int64
}

// serve starts a server whose handler gets the request number (from 1).
// It answers HEAD itself with 405, as a server that declares nothing may,
// so a handler sees (and counts) the GETs alone; serveAll passes HEAD on.
func serve(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int64, c *counter)) *counter {
	t.Helper()
	return serveAll(t, h, false)
}

func serveAll(t *testing.T, h func(w http.ResponseWriter, r *http.Request, n int64, c *counter), head bool) *counter {
	t.Helper()
	c := &counter{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead && !head {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
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
	w.Header().Set("ETag", `"`+guardtest.Sum(data)[:16]+`"`)
	http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
}

// dropAfter sends the headers of the whole file, k bytes of it, and then
// drops the connection.
func dropAfter(w http.ResponseWriter, data []byte, k int) {
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("ETag", `"`+guardtest.Sum(data)[:16]+`"`)
	w.WriteHeader(http.StatusOK)
	w.Write(data[:k])
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

// request is a Request with test-sized timings.
func request(t *testing.T, urls ...string) fetch.Request {
	return fetch.Request{
		URLs:       urls,
		Dest:       filepath.Join(t.TempDir(), "m.gguf"),
		Backoff:    time.Millisecond,
		RateWindow: 5 * time.Second,
	}
}

func mustFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes, sha256 %s; want %d bytes, %s", path, len(got), guardtest.Sum(got)[:12], len(want), guardtest.Sum(want)[:12])
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

// partialInParts writes what an earlier run in parts leaves for dest: the
// partial file at data's full size, sparse but for its first part bytes,
// and a record of parts of part bytes that counts them.
func partialInParts(t *testing.T, dest string, data []byte, part int64) {
	t.Helper()
	f, err := os.Create(dest + ".partial")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data[:part], 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		t.Fatal(err)
	}
	rec := ranged.NewRecord(int64(len(data)), part)
	rec.Done[0] = part
	if err := ranged.Save(dest+".partial.parts", rec); err != nil {
		t.Fatal(err)
	}
}
