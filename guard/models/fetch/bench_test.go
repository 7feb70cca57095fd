package fetch_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
)

// BenchmarkFetchLoopback downloads a 64 MB file from a loopback server:
// hashing, writing, fsync and rename included. The whole download through
// guard, against curl, is `go run ./cmd/bench download`.
func BenchmarkFetchLoopback(b *testing.B) {
	const size = 64 << 20
	data := guardtest.GGUF(size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	r := fetch.Request{URLs: []string{srv.URL + "/m.gguf"}, Dest: filepath.Join(b.TempDir(), "bench.gguf"), Size: size, Client: srv.Client()}
	b.SetBytes(size)
	for b.Loop() {
		if _, err := fetch.Fetch(context.Background(), r); err != nil {
			b.Fatal(err)
		}
		os.Remove(r.Dest)
	}
}
