package heallog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
)

func TestWriteAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "selfheal.log")
	l := heallog.New(path, nil)
	if _, err := os.Stat(path); err == nil {
		t.Fatal("log opened before the first event")
	}
	l.Write(heallog.Event{Event: "model.download", Tool: "llama-completion", Target: "/m/q.gguf", Bytes: 42, DurationMS: 7})
	l.Write(heallog.Event{Level: "warn", Event: "timeout", Tool: "npx", Attempt: 2})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	recs, err := heallog.Read(path, 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Event != "model.download" || recs[0].Bytes != 42 || recs[0].Target != "/m/q.gguf" ||
		recs[1].Level != "warn" || recs[1].Attempt != 2 {
		t.Fatalf("read back %+v", recs)
	}
	if recs[0].TS.IsZero() {
		t.Fatal("no timestamp")
	}
	last, _ := heallog.Read(path, 1, time.Time{})
	if len(last) != 1 || last[0].Event != "timeout" {
		t.Fatalf("last 1 = %+v", last)
	}
	future, _ := heallog.Read(path, 0, time.Now().Add(time.Hour))
	if len(future) != 0 {
		t.Fatalf("since filter kept %d", len(future))
	}
}

func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep me\n"), 0o644)
	link := filepath.Join(dir, "selfheal.log")
	os.Symlink(victim, link)
	var warn bytes.Buffer
	l := heallog.New(link, &warn)
	l.Write(heallog.Event{Event: "preflight"})
	l.Write(heallog.Event{Event: "preflight"})
	l.Close()
	if got, _ := os.ReadFile(victim); string(got) != "keep me\n" {
		t.Fatalf("victim changed: %q", got)
	}
	if !strings.Contains(warn.String(), "symlink") || strings.Count(warn.String(), "\n") != 1 {
		t.Fatalf("warning %q, want one line naming the symlink", warn.String())
	}
}

func TestRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "selfheal.log")
	os.WriteFile(path, bytes.Repeat([]byte("x"), 200), 0o600)
	l := heallog.New(path, nil)
	l.MaxBytes = 100
	l.Write(heallog.Event{Event: "preflight"})
	l.Close()
	if fi, err := os.Stat(path + ".1"); err != nil || fi.Size() != 200 {
		t.Fatalf("rotated file: %v %v", fi, err)
	}
	recs, _ := heallog.Read(path, 0, time.Time{})
	if len(recs) != 1 {
		t.Fatalf("after rotation read %d events", len(recs))
	}
}
