package heallog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/heallog"
)

// A FIFO at the log's path (anyone can mkfifo /tmp/selfheal.log) must
// neither hang a call that logs nor guard status.
func TestFIFOLogNeitherHangsNorSwallows(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "selfheal.log")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	var warn bytes.Buffer
	guardtest.Within(t, "writing to a FIFO log", func() {
		l := heallog.New(fifo, &warn)
		l.Write(heallog.Event{Event: "preflight"})
		l.Close()
	})
	if !strings.Contains(warn.String(), "not a regular file") {
		t.Errorf("warning %q, want one naming the FIFO", warn.String())
	}
	guardtest.Within(t, "reading a FIFO log", func() {
		if _, err := heallog.Read(fifo, 10, time.Time{}); err == nil {
			t.Error("Read of a FIFO: no error")
		}
	})
}

// The shared default in /tmp taken by another user: events go to the
// per-user fallback, and the person is told where, once.
func TestFallbackWhenTheSharedLogIsNotOurs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the log to another user")
	}
	dir := t.TempDir()
	shared := filepath.Join(dir, "selfheal.log")
	os.WriteFile(shared, []byte("theirs\n"), 0o644)
	os.Chown(shared, 65534, 65534)
	fallback := filepath.Join(dir, "state", "selfheal.log")
	var warn bytes.Buffer
	for range 2 {
		l := heallog.New(shared, &warn)
		l.Fallback = fallback
		l.Write(heallog.Event{Event: "model.download", Result: "ok"})
		l.Close()
	}
	if got, _ := os.ReadFile(shared); string(got) != "theirs\n" {
		t.Errorf("the other user's log changed: %q", got)
	}
	recs, err := heallog.Read(fallback, 0, time.Time{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("fallback log holds %d events (%v), want 2", len(recs), err)
	}
	if w := warn.String(); strings.Count(w, "\n") != 1 || !strings.Contains(w, "belongs to another user") || !strings.Contains(w, fallback) {
		t.Errorf("warning %q, want one line naming the cause and the fallback", w)
	}
	if got := heallog.Where(shared, fallback); got != fallback {
		t.Errorf("Where = %s, want the fallback", got)
	}
	if got := heallog.Where(filepath.Join(dir, "none.log"), fallback); got != filepath.Join(dir, "none.log") {
		t.Errorf("Where for a free path = %s, want the path", got)
	}
}
