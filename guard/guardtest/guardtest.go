// Package guardtest holds the fixtures guard's tests share, as
// net/http/httptest does for HTTP: model files, their sums, a recorder of
// heal events, a buffer several goroutines may write. Only tests import it;
// it exists so that each fixture is written once, not once a package.
package guardtest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
)

// GGUF returns size bytes that pass guard's model checks: the magic, GGUF
// version 3, then a xorshift pattern no part of which repeats at a small
// shift, so a download resumed at a wrong offset is seen. A size below 8
// gives a cut header.
func GGUF(size int) []byte {
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

// WriteGGUF writes GGUF(size) to path, creating its folder, and returns
// the bytes written.
func WriteGGUF(t testing.TB, path string, size int) []byte {
	t.Helper()
	b := GGUF(size)
	WriteFile(t, path, string(b), 0o644)
	return b
}

// WriteFile writes text to path with exactly mode (the umask aside),
// creating its folder.
func WriteFile(t testing.TB, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// Sum is the hex sha256 of b, as a manifest pins it.
func Sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Recorder collects heal events from any goroutine; pass its Log where a
// func(heallog.Event) is wanted.
type Recorder struct {
	mu     sync.Mutex
	events []heallog.Event
}

// Log records e.
func (r *Recorder) Log(e heallog.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// All returns the events so far, oldest first.
func (r *Recorder) All() []heallog.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]heallog.Event(nil), r.events...)
}

// Named returns the events so far whose Event is name, oldest first.
func (r *Recorder) Named(name heallog.Name) []heallog.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []heallog.Event
	for _, e := range r.events {
		if e.Event == name {
			out = append(out, e)
		}
	}
	return out
}

// Buffer is an io.Writer several goroutines may write (a heal's stderr, a
// progress line) while the test reads it.
type Buffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// Within runs f and fails the test when it has not returned after 20
// seconds: an open or a read that blocks (a FIFO where a file belongs)
// fails the test instead of hanging the suite. f keeps running.
func Within(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s blocked", what)
	}
}

// SmallDisk mounts a tmpfs of size (a disk that fills up: "2m", say) in a
// temp folder and unmounts it at the end of the test; it skips the test
// without root or where the sandbox refuses mounts.
func SmallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mount tmpfs refused by the sandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
