package promptcache_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/promptcache"
)

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestKeyStable(t *testing.T) {
	in := promptcache.KeyInput{
		Tool:     "llama-completion",
		ModelID:  "484220320:1700000000000000000:42",
		Args:     []string{"-m", "MODEL", "-p", "hello", "-n", "32", "-no-cnv"},
		FileText: []byte("prompt\x00\xff"),
	}
	k := promptcache.Key(in)
	if !hexKey.MatchString(k) {
		t.Fatalf("Key = %q, want 64 lower-case hex digits", k)
	}
	again := in
	again.Args = append([]string(nil), in.Args...)
	again.FileText = append([]byte(nil), in.FileText...)
	if promptcache.Key(again) != k {
		t.Fatal("equal inputs gave different keys")
	}
	// Pinned so that a change to the encoding is a deliberate FormatVersion
	// bump, not an accident that silently orphans every user's cache.
	const golden = "8f4842abb495e38e45c67190f963fe98f445b50594b93eed056c93b7d7c0a579"
	if k != golden {
		t.Errorf("Key = %s, want %s (bump FormatVersion when the encoding changes)", k, golden)
	}
}

func TestKeySeparates(t *testing.T) {
	base := promptcache.KeyInput{Tool: "llama-completion", ModelID: "sha", Args: []string{"-p", "hi"}}
	with := func(f func(*promptcache.KeyInput)) promptcache.KeyInput {
		in := base
		in.Args = append([]string(nil), base.Args...)
		f(&in)
		return in
	}
	tests := []struct {
		name string
		a, b promptcache.KeyInput
	}{
		{"arg boundary", with(func(in *promptcache.KeyInput) { in.Args = []string{"a b"} }), with(func(in *promptcache.KeyInput) { in.Args = []string{"a", "b"} })},
		{"arg split", with(func(in *promptcache.KeyInput) { in.Args = []string{"ab", ""} }), with(func(in *promptcache.KeyInput) { in.Args = []string{"a", "b"} })},
		{"no args vs one empty", with(func(in *promptcache.KeyInput) { in.Args = nil }), with(func(in *promptcache.KeyInput) { in.Args = []string{""} })},
		{"arg order", with(func(in *promptcache.KeyInput) { in.Args = []string{"-n", "1", "-p", "x"} }), with(func(in *promptcache.KeyInput) { in.Args = []string{"-p", "x", "-n", "1"} })},
		{"tool", base, with(func(in *promptcache.KeyInput) { in.Tool = "llama-simple" })},
		{"model id", base, with(func(in *promptcache.KeyInput) { in.ModelID = "other" })},
		{"tool/model boundary", with(func(in *promptcache.KeyInput) { in.Tool, in.ModelID = "ab", "c" }), with(func(in *promptcache.KeyInput) { in.Tool, in.ModelID = "a", "bc" })},
		{"model/args boundary", with(func(in *promptcache.KeyInput) { in.ModelID, in.Args = "m-p", []string{"hi"} }), with(func(in *promptcache.KeyInput) { in.ModelID = "m" })},
		{"file text", with(func(in *promptcache.KeyInput) { in.FileText = []byte("one") }), with(func(in *promptcache.KeyInput) { in.FileText = []byte("two") })},
		{"no file vs empty file", base, with(func(in *promptcache.KeyInput) { in.FileText = []byte{} })},
		{"file text vs arg", with(func(in *promptcache.KeyInput) { in.FileText = []byte("x") }), with(func(in *promptcache.KeyInput) { in.Args = append(in.Args, "x") })},
	}
	for _, tt := range tests {
		if promptcache.Key(tt.a) == promptcache.Key(tt.b) {
			t.Errorf("%s: %+v and %+v share a key", tt.name, tt.a, tt.b)
		}
	}
}

func TestModelIDPinned(t *testing.T) {
	// A pinned sum is the identity itself: no stat, so a missing path is fine.
	id, err := promptcache.ModelID(filepath.Join(t.TempDir(), "absent.gguf"), " ABCDEF ")
	if err != nil || id != "abcdef" {
		t.Fatalf("ModelID = %q, %v; want abcdef, nil", id, err)
	}
}

func TestModelIDFromStat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, []byte("GGUF\x03\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := promptcache.ModelID(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^8:[0-9]+:[1-9][0-9]*$`).MatchString(first) {
		t.Fatalf("ModelID = %q, want size:mtime_ns:inode", first)
	}
	if again, _ := promptcache.ModelID(path, ""); again != first {
		t.Fatalf("ModelID changed without a change to the file: %q then %q", first, again)
	}
	later := time.Unix(1_800_000_000, 123)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	touched, _ := promptcache.ModelID(path, "")
	if touched == first {
		t.Fatal("a new mtime must give a new model id")
	}
	// A re-download lands as a new file (new inode) even with equal size.
	repl := path + ".new"
	if err := os.WriteFile(repl, []byte("GGUF\x03\x00\x00\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(repl, later, later); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(repl, path); err != nil {
		t.Fatal(err)
	}
	if replaced, _ := promptcache.ModelID(path, ""); replaced == touched {
		t.Fatal("a replaced file must give a new model id")
	}
	if _, err := promptcache.ModelID(filepath.Join(t.TempDir(), "absent"), ""); err == nil {
		t.Fatal("ModelID of a missing file without a pin: want an error")
	}
}
