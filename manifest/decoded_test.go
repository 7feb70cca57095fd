package manifest_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

func TestLoadDecoded(t *testing.T) {
	home, stateDir := t.TempDir(), t.TempDir()

	// No user manifest: the embedded default, then the same from the cache.
	want, err := manifest.Load("", home)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		got, err := manifest.LoadDecoded("", home, stateDir)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: cached manifest differs:\n got %+v\nwant %+v", i, got, want)
		}
	}
	if _, err := os.Stat(state.Layout{Dir: stateDir}.DecodedManifest()); err != nil {
		t.Fatalf("no cache written: %v", err)
	}

	// A user manifest appears: the cache must not hide it.
	user := manifest.UserPath(home)
	os.MkdirAll(filepath.Dir(user), 0o755)
	os.WriteFile(user, []byte("[tools.one]\n"), 0o644)
	got, err := manifest.LoadDecoded("", home, stateDir)
	if err != nil || got.Tool("one") == nil || got.Tool("npx") != nil {
		t.Fatalf("user manifest not read: %v %v", got, err)
	}

	// Edited in place (same size, new mtime): read again.
	os.WriteFile(user, []byte("[tools.two]\n"), 0o644)
	os.Chtimes(user, time.Now().Add(time.Second), time.Now().Add(time.Second))
	got, err = manifest.LoadDecoded("", home, stateDir)
	if err != nil || got.Tool("two") == nil {
		t.Fatalf("edited manifest not read: %v %v", got, err)
	}

	// A broken manifest is an error even with a cache of the old one.
	os.WriteFile(user, []byte("[tools.two\n"), 0o644)
	if _, err := manifest.LoadDecoded("", home, stateDir); err == nil {
		t.Fatal("broken manifest passed through the cache")
	}

	// A corrupt cache file is ignored.
	os.WriteFile(user, []byte("[tools.three]\n"), 0o644)
	os.WriteFile(state.Layout{Dir: stateDir}.DecodedManifest(), []byte("{garbage"), 0o600)
	got, err = manifest.LoadDecoded("", home, stateDir)
	if err != nil || got.Tool("three") == nil {
		t.Fatalf("corrupt cache: %v %v", got, err)
	}

	// A named missing file (GUARD_MANIFEST) stays an error.
	if _, err := manifest.LoadDecoded(filepath.Join(home, "nope.toml"), home, stateDir); err == nil {
		t.Fatal("missing GUARD_MANIFEST accepted")
	}
}

func BenchmarkLoadDecoded(b *testing.B) {
	home, stateDir := b.TempDir(), b.TempDir()
	manifest.LoadDecoded("", home, stateDir)
	for b.Loop() {
		if _, err := manifest.LoadDecoded("", home, stateDir); err != nil {
			b.Fatal(err)
		}
	}
}
