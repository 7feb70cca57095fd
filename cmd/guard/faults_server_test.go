package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	rate   int // bytes per second
}

func newFaultModelServer(t testing.TB, size, rate int) *faultModelServer {
	s := &faultModelServer{Data: faultGGUF(size), rate: rate}
	sum := sha256.Sum256(s.Data)
	s.SHA256 = hex.EncodeToString(sum[:])
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

// faultGGUF is a valid GGUF header (version 3) followed by a pattern no
// prefix of which repeats at a small shift, so a resume at a wrong offset
// is seen.
func faultGGUF(size int) []byte {
	b := make([]byte, size)
	copy(b, "GGUF\x03\x00\x00\x00")
	x := uint32(2463534242)
	for i := 8; i < size; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
