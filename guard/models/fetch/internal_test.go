package fetch

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 0 ", 0},
		{"-3", 0},
		{"soon", 0},
		{"Sat, 01 Aug 2026 12:00:30 GMT", 30 * time.Second},
		{"Sat, 01 Aug 2026 11:00:00 GMT", 0},
		{"999999999", 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/*", 0, -1, true},
		{"bytes 100-199/150", 0, 0, false},
		{"bytes */200", 0, 0, false},
		{"items 1-2/3", 0, 0, false},
		{"bytes 5-4/10", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		s, _, tot, ok := parseContentRange(tt.in)
		if ok != tt.ok || (ok && (s != tt.start || tot != tt.total)) {
			t.Errorf("parseContentRange(%q) = %d %d %v", tt.in, s, tot, ok)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	for f := range 20 {
		b := backoff(time.Second, f)
		want := min(time.Second<<min(f, 10), maxBackoff)
		if b < want/2 || b > want*3/2 {
			t.Errorf("backoff(1s, %d) = %s, want within [%s, %s]", f, b, want/2, want*3/2)
		}
	}
}

// TestRoomIsAskedForOnce: a download asks the file system for the file's
// room once, whether its first part turns out fast (the rest in one
// stream) or slow (the rest in parts). Asking again for room that is
// there costs a tmpfs a pass over every page (docs/BENCHMARKS.md).
func TestRoomIsAskedForOnce(t *testing.T) {
	t.Parallel() // its fallocate hook is its own Request's
	data := make([]byte, 1<<20)
	copy(data, "GGUF\x03\x00\x00\x00")
	for i := 8; i < len(data); i++ {
		data[i] = byte(i * 7)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)

	var calls atomic.Int32
	fallocate := func(fd int, mode uint32, off, n int64) error {
		calls.Add(1)
		return unix.Fallocate(fd, mode, off, n)
	}

	for _, tt := range []struct {
		name     string
		fastConn int64
		conns    int
	}{
		{"first part fast, the rest in one stream", 1, 1},
		{"first part slow, the rest in parts", 1 << 50, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			dest := filepath.Join(t.TempDir(), "m.gguf")
			res, err := Fetch(context.Background(), Request{
				URLs: []string{srv.URL + "/m.gguf"}, Dest: dest, Size: int64(len(data)),
				Backoff: time.Millisecond, RateWindow: 5 * time.Second,
				FastConn: tt.fastConn, PartSize: 128 << 10, Connections: 4,
				fallocate: fallocate,
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Connections != tt.conns {
				t.Errorf("connections = %d, want %d (the case this test means)", res.Connections, tt.conns)
			}
			if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("file differs from the source (%v)", err)
			}
			if n := calls.Load(); n != 1 {
				t.Errorf("fallocate called %d times, want once", n)
			}
		})
	}
}
