package fetch_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
)

// BenchmarkFetchLoopback downloads a 64 MB file from a loopback server:
// hashing, writing, fsync and rename included. FETCH_BENCH_DIR puts the
// destination elsewhere (a tmpfs, to leave the disk out); FETCH_BENCH_URL
// and FETCH_BENCH_SIZE download from another server instead (see
// bench/download-vs-curl.sh, which runs curl against the same one).
func BenchmarkFetchLoopback(b *testing.B) {
	url, size := os.Getenv("FETCH_BENCH_URL"), int64(64<<20)
	var client *http.Client
	if url == "" {
		data := guardtest.GGUF(int(size))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
		}))
		defer srv.Close()
		url, client = srv.URL+"/m.gguf", srv.Client()
	} else {
		n, err := strconv.ParseInt(os.Getenv("FETCH_BENCH_SIZE"), 10, 64)
		if err != nil {
			b.Fatalf("FETCH_BENCH_SIZE: %v", err)
		}
		size = n
	}
	dir := os.Getenv("FETCH_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	r := fetch.Request{URLs: []string{url}, Dest: filepath.Join(dir, "bench.gguf"), Size: size, Client: client}
	b.SetBytes(size)
	for b.Loop() {
		if _, err := fetch.Fetch(context.Background(), r); err != nil {
			b.Fatal(err)
		}
		os.Remove(r.Dest)
	}
}
