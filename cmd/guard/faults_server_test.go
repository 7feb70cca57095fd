package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// faultModelServer serves one GGUF file at /m.gguf, slowly enough that a kill
// lands in the middle of the body, with Range support (http.ServeContent)
// so a resume can be seen. It counts requests, ranged ones apart.
type faultModelServer struct {
	*httptest.Server
	Data   []byte
	SHA256 string

	gets   atomic.Int64 // GET requests for the file
	ranged atomic.Int64 // of those, with a Range header
	mu     sync.Mutex
	rate   int      // bytes per second
	asked  []string // the Range header of every GET, "" for none
}

// Asked is the Range header of every GET so far ("" for none).
func (s *faultModelServer) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

func newFaultModelServer(t testing.TB, size, rate int) *faultModelServer {
	s := &faultModelServer{Data: guardtest.GGUF(size), rate: rate}
	s.SHA256 = guardtest.Sum(s.Data)
	modTime := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/m.gguf" {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodGet {
			s.gets.Add(1)
			if r.Header.Get("Range") != "" {
				s.ranged.Add(1)
			}
			s.mu.Lock()
			s.asked = append(s.asked, r.Header.Get("Range"))
			s.mu.Unlock()
		}
		w.Header().Set("ETag", `"`+s.SHA256[:16]+`"`)
		http.ServeContent(&faultPacedWriter{ResponseWriter: w, rate: s.Rate()}, r, "m.gguf", modTime, bytes.NewReader(s.Data))
	}))
	t.Cleanup(s.Close)
	return s
}

// Rate is the pace of a body in bytes per second.
func (s *faultModelServer) Rate() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate
}

// URL is the model's address.
func (s *faultModelServer) URL() string { return s.Server.URL + "/m.gguf" }

// faultPacedWriter writes in small pieces at about rate bytes per second and
// flushes each, so the client sees a steady trickle.
type faultPacedWriter struct {
	http.ResponseWriter
	rate int
}

func (p *faultPacedWriter) Write(b []byte) (int, error) {
	const piece = 32 << 10
	n := 0
	for len(b) > 0 {
		k := min(piece, len(b))
		m, err := p.ResponseWriter.Write(b[:k])
		n += m
		if err != nil {
			return n, err
		}
		if f, ok := p.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		b = b[k:]
		if p.rate > 0 {
			time.Sleep(time.Duration(k) * time.Second / time.Duration(p.rate))
		}
	}
	return n, nil
}
