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

// A rotation that cannot happen (another user's selfheal.log.1 in a sticky
// /tmp; here a folder in its place) must not let the log grow past its
// cap: events go to the fallback, with the one warning.
func TestUnrotatableLogFallsBack(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "selfheal.log")
	os.WriteFile(shared, []byte(strings.Repeat("x", 200)+"\n"), 0o600)
	os.MkdirAll(filepath.Join(shared+".1", "inside"), 0o700)
	fallback := filepath.Join(dir, "state", "selfheal.log")
	var warn bytes.Buffer
	l := heallog.New(shared, &warn)
	l.MaxBytes, l.Fallback = 100, fallback
	l.Write(heallog.Event{Event: "model.download", Result: "ok"})
	l.Close()
	if fi, _ := os.Stat(shared); fi.Size() != 201 {
		t.Errorf("the log past its cap grew to %d bytes", fi.Size())
	}
	if recs, err := heallog.Read(fallback, 0, time.Time{}); err != nil || len(recs) != 1 {
		t.Fatalf("fallback log holds %d events (%v), want 1", len(recs), err)
	}
	if !strings.Contains(warn.String(), "rotate") {
		t.Errorf("warning %q, want one naming the failed rotation", warn.String())
	}
}

// Another user's FILE.1 holds no event of guard's: guard status reads past
// it, as if it were not there.
func TestReadSkipsAnotherUsersRotation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	path := filepath.Join(t.TempDir(), "selfheal.log")
	os.WriteFile(path, []byte(`{"level":"info","ts":"2026-01-02T00:00:00Z","event":"ours"}`+"\n"), 0o600)
	os.WriteFile(path+".1", []byte(`{"level":"info","ts":"2026-01-01T00:00:00Z","event":"planted"}`+"\n"), 0o644)
	if err := os.Chown(path+".1", 65534, 65534); err != nil {
		t.Fatal(err)
	}
	recs, err := heallog.Read(path, 0, time.Time{})
	if err != nil || len(recs) != 1 || recs[0].Event != "ours" {
		t.Fatalf("Read = %+v (%v), want only guard's own event", recs, err)
	}
}
