package verify_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/verify"
)

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHeader(t *testing.T) {
	tests := []struct {
		in   string
		kind string // "" = valid
		msg  string
	}{
		{"GGUF\x03\x00\x00\x00", "", ""},
		{"GGUF\x02\x00\x00\x00rest", "", ""},
		{"", "empty", "empty file"},
		{"GGUF\x03", "short", "inside the GGUF header"},
		{"GGUF\x01\x00\x00\x00", "version", "version 1"},
		{"GGUF\x00\x00\x00\x03", "version", "big-endian"},
		{"Entry not found", "entry-not-found", "Entry not found"},
		{"Entry no", "entry-not-found", "does not exist"},
		{"<!DOCTYPE html><html>", "html", "HTML page"},
		{"\n  <html><head>", "html", "HTML page"},
		{`{"error":"Repository not found"}`, "json", "Repository not found"},
		{"{\n  \"error\": \"x\"}", "json", "JSON error"},
		{"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 1\n", "git-lfs", "git-lfs"},
		{"PK\x03\x04\x00\x00\x00\x00", "magic", `starts with "PK\x03\x04`},
		{"<\x00\x01\x02\x03\x04\x05\x06", "magic", "not a GGUF"},
	}
	for _, tt := range tests {
		err := verify.Header([]byte(tt.in))
		if tt.kind == "" {
			if err != nil {
				t.Errorf("Header(%q) = %v, want nil", tt.in, err)
			}
			continue
		}
		var he *verify.HeaderError
		if !errors.As(err, &he) {
			t.Errorf("Header(%q) = %v, want a *HeaderError", tt.in, err)
			continue
		}
		if he.Kind != tt.kind || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Header(%q) = %s %q, want %s containing %q", tt.in, he.Kind, err, tt.kind, tt.msg)
		}
	}
}

func TestErrorBody(t *testing.T) {
	for _, in := range []string{"Entry not found", "<html>", `{"error":"x"}`, "version https://git-lfs.github.com/spec/v1"} {
		if verify.ErrorBody([]byte(in)) == nil {
			t.Errorf("ErrorBody(%q) = nil, want an error", in)
		}
	}
	for _, in := range []string{"GGUF\x03\x00\x00\x00", "plain text file", "\x00\x01binary", "{x"} {
		if err := verify.ErrorBody([]byte(in)); err != nil {
			t.Errorf("ErrorBody(%q) = %v, want nil", in, err)
		}
	}
}

func TestQuick(t *testing.T) {
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	good := guardtest.GGUF(4096)
	path := filepath.Join(dir, "m.gguf")
	write(t, path, good)

	tests := []struct {
		name string
		spec verify.Spec
		want verify.Status
	}{
		{"missing", verify.Spec{Path: filepath.Join(dir, "nope.gguf"), Size: 4096}, verify.Missing},
		{"unknown size", verify.Spec{Path: path}, verify.Unverified},
		{"size ok unpinned", verify.Spec{Path: path, Size: 4096}, verify.Unverified},
		{"shorter", verify.Spec{Path: path, Size: 8192}, verify.Truncated},
		{"longer", verify.Spec{Path: path, Size: 100}, verify.Truncated},
		{"pinned no stamp", verify.Spec{Path: path, Size: 4096, SHA256: guardtest.Sum(good)}, verify.Stale},
		{"directory", verify.Spec{Path: dir}, verify.NotRegular},
	}
	for _, tt := range tests {
		if got := verify.Quick(tt.spec, stamps); got != tt.want {
			t.Errorf("%s: Quick = %s, want %s", tt.name, got, tt.want)
		}
	}

	html := filepath.Join(dir, "html.gguf")
	write(t, html, []byte("Entry not found"))
	if got := verify.Quick(verify.Spec{Path: html}, stamps); got != verify.NotGGUF {
		t.Errorf("Entry not found: Quick = %s, want not-gguf", got)
	}
	if got := verify.Quick(verify.Spec{Path: html, Size: 4096}, stamps); got != verify.Truncated {
		t.Errorf("Entry not found with size: Quick = %s, want truncated", got)
	}
}

// A FIFO at the model's path or at its stamp's is never waited on: the
// model is not a regular file, the stamp is as good as none.
func TestFIFOsAreNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	fifo := filepath.Join(dir, "fifo.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	good := guardtest.GGUF(4096)
	path := filepath.Join(dir, "m.gguf")
	write(t, path, good)
	spec := verify.Spec{Path: path, Size: 4096, SHA256: guardtest.Sum(good)}
	if st, _, err := verify.Full(spec, stamps); st != verify.OK || err != nil {
		t.Fatalf("Full = %s, %v", st, err)
	}
	stamp := verify.StampPath(stamps, path)
	os.Remove(stamp)
	if err := syscall.Mkfifo(stamp, 0o600); err != nil {
		t.Fatal(err)
	}
	guardtest.Within(t, "Quick and Full of FIFOs", func() {
		if st := verify.Quick(verify.Spec{Path: fifo, Size: 4096}, stamps); st != verify.NotRegular {
			t.Errorf("Quick of a FIFO = %s, want %s", st, verify.NotRegular)
		}
		if st, _, err := verify.Full(verify.Spec{Path: fifo, Size: 4096}, stamps); st != verify.NotRegular || err != nil {
			t.Errorf("Full of a FIFO = %s, %v, want %s", st, err, verify.NotRegular)
		}
		if st := verify.Quick(spec, stamps); st != verify.Stale {
			t.Errorf("Quick with a FIFO for its stamp = %s, want stale", st)
		}
	})
	// The hash rewrites the stamp: the FIFO in guard's folder is replaced.
	if st, _, err := verify.Full(spec, stamps); st != verify.OK || err != nil {
		t.Fatalf("Full over a FIFO stamp = %s, %v", st, err)
	}
	if st := verify.Quick(spec, stamps); st != verify.OK {
		t.Errorf("Quick after the stamp was rewritten = %s, want ok", st)
	}
}

func TestFullThenQuick(t *testing.T) {
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	good := guardtest.GGUF(1 << 16)
	path := filepath.Join(dir, "m.gguf")
	write(t, path, good)
	spec := verify.Spec{Path: path, Size: int64(len(good)), SHA256: strings.ToUpper(guardtest.Sum(good))}

	st, got, err := verify.Full(spec, stamps)
	if err != nil || st != verify.OK || got != guardtest.Sum(good) {
		t.Fatalf("Full = %s %s %v, want ok %s", st, got, err, guardtest.Sum(good))
	}
	if st := verify.Quick(spec, stamps); st != verify.OK {
		t.Fatalf("Quick after Full = %s, want ok", st)
	}

	// Same size, same mtime, different bytes (what cp -p does): the
	// ctime still moves, so the stamp no longer vouches for the file.
	fi, _ := os.Stat(path)
	bad := append([]byte(nil), good...)
	bad[100] ^= 0xff
	time.Sleep(10 * time.Millisecond) // coarse ctime clocks on some filesystems
	write(t, path, bad)
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if st := verify.Quick(spec, stamps); st != verify.Stale {
		t.Fatalf("Quick after in-place rewrite = %s, want stale", st)
	}
	st, got, err = verify.Full(spec, stamps)
	if err != nil || st != verify.HashMismatch || got != guardtest.Sum(bad) {
		t.Fatalf("Full on changed file = %s %s %v, want hash-mismatch", st, got, err)
	}
	// The mismatch is remembered: no rehash needed to say so again.
	if st := verify.Quick(spec, stamps); st != verify.HashMismatch {
		t.Fatalf("Quick after mismatch = %s, want hash-mismatch", st)
	}

	// Replaced by a new file (new inode) with the right content: stale
	// until hashed, then ok.
	tmp := path + ".new"
	write(t, tmp, good)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if st := verify.Quick(spec, stamps); st != verify.Stale {
		t.Fatalf("Quick after replace = %s, want stale", st)
	}
	if err := verify.WriteStamp(stamps, path, guardtest.Sum(good), "manifest"); err != nil {
		t.Fatal(err)
	}
	if st := verify.Quick(spec, stamps); st != verify.OK {
		t.Fatalf("Quick after WriteStamp = %s, want ok", st)
	}
	if err := verify.RemoveStamp(stamps, path); err != nil {
		t.Fatal(err)
	}
	if st := verify.Quick(spec, stamps); st != verify.Stale {
		t.Fatalf("Quick after RemoveStamp = %s, want stale", st)
	}
}

func TestFullUnpinnedAndBad(t *testing.T) {
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	path := filepath.Join(dir, "m.gguf")
	b := guardtest.GGUF(1000)
	write(t, path, b)
	st, got, err := verify.Full(verify.Spec{Path: path, Size: 1000}, stamps)
	if err != nil || st != verify.Unverified || got != guardtest.Sum(b) {
		t.Fatalf("Full unpinned = %s %s %v", st, got, err)
	}
	st, _, err = verify.Full(verify.Spec{Path: filepath.Join(dir, "x"), Size: 1}, stamps)
	if err != nil || st != verify.Missing {
		t.Fatalf("Full missing = %s %v", st, err)
	}
	st, _, err = verify.Full(verify.Spec{Path: path, Size: 999}, stamps)
	if err != nil || st != verify.Truncated {
		t.Fatalf("Full truncated = %s %v", st, err)
	}
	write(t, path, []byte("<!DOCTYPE html>"))
	st, _, err = verify.Full(verify.Spec{Path: path}, stamps)
	if err != nil || st != verify.NotGGUF {
		t.Fatalf("Full html = %s %v", st, err)
	}
}

func TestStampIsPerPath(t *testing.T) {
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	b := guardtest.GGUF(512)
	a, c := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "c.gguf")
	write(t, a, b)
	if err := os.Link(a, c); err != nil {
		t.Skip("hard links not supported:", err)
	}
	if err := verify.WriteStamp(stamps, a, guardtest.Sum(b), "manifest"); err != nil {
		t.Fatal(err)
	}
	spec := verify.Spec{Path: c, Size: 512, SHA256: guardtest.Sum(b)}
	// c was never verified under its own name; the link count change also
	// moved a's ctime, so a needs a rehash as well.
	if st := verify.Quick(spec, stamps); st != verify.Stale {
		t.Fatalf("Quick(c) = %s, want stale", st)
	}
}

// A file with no pin whose sha256 was checked against what its server
// declared is as trusted as a pinned one while it stays the file it was;
// the stamp says who declared the sum, and outlives the file.
func TestDeclaredStamp(t *testing.T) {
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	b := guardtest.GGUF(4096)
	path := filepath.Join(dir, "m.gguf")
	write(t, path, b)
	spec := verify.Spec{Path: path, Size: 4096}
	if st := verify.Quick(spec, stamps); st != verify.Unverified {
		t.Fatalf("Quick before = %s, want unverified", st)
	}
	if _, ok := verify.Recorded(stamps, path); ok {
		t.Fatal("a record of a file never hashed")
	}
	by := "https://huggingface.co/org/m/resolve/main/m.gguf"
	if err := verify.WriteStamp(stamps, path, guardtest.Sum(b), by); err != nil {
		t.Fatal(err)
	}
	if st := verify.Quick(spec, stamps); st != verify.OK {
		t.Fatalf("Quick after a declared stamp = %s, want ok", st)
	}
	rec, ok := verify.Recorded(stamps, path)
	if !ok || rec.DeclaredBy != by || rec.SHA256 != guardtest.Sum(b) {
		t.Fatalf("Recorded = %+v %v", rec, ok)
	}
	// Hashed only, checked against nothing: still unverified.
	if err := verify.WriteStamp(stamps, path, guardtest.Sum(b), ""); err != nil {
		t.Fatal(err)
	}
	if st := verify.Quick(spec, stamps); st != verify.Unverified {
		t.Fatalf("Quick after a plain stamp = %s, want unverified", st)
	}
	// Another file at the path: the declaration no longer vouches for it.
	verify.WriteStamp(stamps, path, guardtest.Sum(b), by)
	time.Sleep(10 * time.Millisecond)
	write(t, path, b)
	if st := verify.Quick(spec, stamps); st != verify.Unverified {
		t.Fatalf("Quick after a rewrite = %s, want unverified", st)
	}
	// Evicted: the record stays.
	os.Remove(path)
	if rec, ok := verify.Recorded(stamps, path); !ok || rec.SHA256 != guardtest.Sum(b) {
		t.Fatalf("Recorded after eviction = %+v %v", rec, ok)
	}
}

func TestSum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	b := guardtest.GGUF(3 << 20)
	write(t, path, b)
	got, err := verify.Sum(path)
	if err != nil || got != guardtest.Sum(b) {
		t.Fatalf("Sum = %s %v, want %s", got, err, guardtest.Sum(b))
	}
	if _, err := verify.Sum(path + "x"); err == nil {
		t.Fatal("Sum of a missing file: no error")
	}
}

func FuzzHeader(f *testing.F) {
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Add([]byte("Entry not found"))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := verify.Header(b)
		valid := len(b) >= 8 && string(b[:4]) == "GGUF" && (b[4] == 2 || b[4] == 3) && b[5] == 0 && b[6] == 0 && b[7] == 0
		if valid != (err == nil) {
			t.Fatalf("Header(%q) = %v, valid = %v", b, err, valid)
		}
		if err != nil && (err.Error() == "" || strings.ContainsAny(err.Error(), "\x00\x1b")) {
			t.Fatalf("Header(%q): bad message %q", b, err)
		}
		_ = verify.ErrorBody(b)
	})
}

// Usable answers as Quick does, except that it does not read the stamp
// of a file with no pin: a declared stamp's OK is Unverified, as healthy.
func TestUsable(t *testing.T) {
	dir := t.TempDir()
	stamps := filepath.Join(dir, "stamps")
	good := guardtest.GGUF(4096)
	path := filepath.Join(dir, "m.gguf")
	write(t, path, good)
	declared := filepath.Join(dir, "declared.gguf")
	write(t, declared, good)
	if err := verify.WriteStamp(stamps, declared, guardtest.Sum(good), "https://huggingface.co/o/m/resolve/main/m.gguf"); err != nil {
		t.Fatal(err)
	}
	pinned := filepath.Join(dir, "pinned.gguf")
	write(t, pinned, good)
	if err := verify.WriteStamp(stamps, pinned, guardtest.Sum(good), "manifest"); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, "html.gguf")
	write(t, html, []byte("Entry not found"))
	for _, tt := range []struct {
		name        string
		spec        verify.Spec
		quick, want verify.Status
	}{
		{"missing", verify.Spec{Path: filepath.Join(dir, "nope.gguf"), Size: 4096}, verify.Missing, verify.Missing},
		{"unpinned no stamp", verify.Spec{Path: path, Size: 4096}, verify.Unverified, verify.Unverified},
		{"unpinned declared", verify.Spec{Path: declared, Size: 4096}, verify.OK, verify.Unverified},
		{"pinned stamped", verify.Spec{Path: pinned, Size: 4096, SHA256: guardtest.Sum(good)}, verify.OK, verify.OK},
		{"pinned other sum", verify.Spec{Path: pinned, Size: 4096, SHA256: pin}, verify.HashMismatch, verify.HashMismatch},
		{"pinned no stamp", verify.Spec{Path: path, Size: 4096, SHA256: guardtest.Sum(good)}, verify.Stale, verify.Stale},
		{"shorter", verify.Spec{Path: path, Size: 8192}, verify.Truncated, verify.Truncated},
		{"not gguf", verify.Spec{Path: html}, verify.NotGGUF, verify.NotGGUF},
		{"directory", verify.Spec{Path: dir}, verify.NotRegular, verify.NotRegular},
	} {
		if got := verify.Quick(tt.spec, stamps); got != tt.quick {
			t.Errorf("%s: Quick = %s, want %s", tt.name, got, tt.quick)
		}
		if got := verify.Usable(tt.spec, stamps); got != tt.want {
			t.Errorf("%s: Usable = %s, want %s", tt.name, got, tt.want)
		}
	}
}
