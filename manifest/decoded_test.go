package manifest_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

func TestLoadDecoded(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprint("lazy=", lazy), func(t *testing.T) { testLoadDecoded(t, lazy) })
	}
}

func testLoadDecoded(t *testing.T, lazy bool) {
	home, stateDir := t.TempDir(), t.TempDir()
	load := func(path string) (*manifest.Manifest, error) {
		m, err := manifest.LoadDecoded(path, home, stateDir, lazy)
		if err == nil {
			t.Cleanup(m.Close)
		}
		return m, err
	}

	// No user manifest: the embedded default, then the same from the cache.
	want, err := manifest.Load("", home)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		got, err := load("")
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation() == "" {
			t.Errorf("round %d: no generation", i)
		}
		if !lazy && !equalJSON(t, got, want) {
			t.Fatalf("round %d: cached manifest differs", i)
		}
		for _, name := range []string{"npx", "llama-completion", "nope"} {
			if !equalJSON(t, got.Tool(name), want.Tool(name)) {
				t.Errorf("round %d: tool %s differs", i, name)
			}
		}
		if !equalJSON(t, got.Budget, want.Budget) || got.ModelsDir != want.ModelsDir || got.Source != want.Source {
			t.Errorf("round %d: settings differ", i)
		}
	}
	if _, err := os.Stat(state.Layout{Dir: stateDir}.DecodedManifest()); err != nil {
		t.Fatalf("no cache written: %v", err)
	}

	// A user manifest appears: the cache must not hide it.
	user := manifest.UserPath(home)
	os.MkdirAll(filepath.Dir(user), 0o755)
	os.WriteFile(user, []byte("[tools.one]\n"), 0o644)
	got, err := load("")
	if err != nil || got.Tool("one") == nil || got.Tool("npx") != nil {
		t.Fatalf("user manifest not read: %v %v", got, err)
	}
	gen := got.Generation()

	// Edited in place (same size, new mtime): read again, a new generation.
	os.WriteFile(user, []byte("[tools.two]\n"), 0o644)
	os.Chtimes(user, time.Now().Add(time.Second), time.Now().Add(time.Second))
	got, err = load("")
	if err != nil || got.Tool("two") == nil {
		t.Fatalf("edited manifest not read: %v %v", got, err)
	}
	if got.Generation() == gen {
		t.Error("the generation did not change with the manifest")
	}

	// A broken manifest is an error even with a cache of the old one.
	os.WriteFile(user, []byte("[tools.two\n"), 0o644)
	if _, err := load(""); err == nil {
		t.Fatal("broken manifest passed through the cache")
	}

	// A corrupt cache file is ignored.
	os.WriteFile(user, []byte("[tools.three]\n"), 0o644)
	os.WriteFile(state.Layout{Dir: stateDir}.DecodedManifest(), []byte("{garbage"), 0o600)
	got, err = load("")
	if err != nil || got.Tool("three") == nil {
		t.Fatalf("corrupt cache: %v %v", got, err)
	}

	// A named missing file (GUARD_MANIFEST) stays an error.
	if _, err := load(filepath.Join(home, "nope.toml")); err == nil {
		t.Fatal("missing GUARD_MANIFEST accepted")
	}
}

// fleet is a manifest of n tools, builds, packages and models, as a
// generator writes one.
func fleet(n int) string {
	var b strings.Builder
	b.WriteString("[packages]\n")
	for i := range n {
		fmt.Fprintf(&b, "cmd%d = \"pkg%d\"\n", i, i)
	}
	for i := range n {
		fmt.Fprintf(&b, "\n[builds.b%d]\ndir = \"~/src/b%d\"\nsteps = [[\"make\"]]\n", i, i)
		fmt.Fprintf(&b, "\n[tools.t%d]\npath = \"~/src/b%d/t%d\"\nbuild = \"b%d\"\nargs = [\"-%d\"]\n", i, i, i, i, i)
	}
	for i := range n {
		fmt.Fprintf(&b, "\n[[models]]\nfile = \"m%d.gguf\"\nsize = %d\nurls = [\"https://example.com/m%d.gguf\"]\n", i, 1000+i, i)
		if i%3 == 0 && n > 1 {
			fmt.Fprintf(&b, "role = \"R%d\"\nfallback = \"m%d.gguf\"\n", i, (i+1)%n)
		} else if i%3 != 0 {
			fmt.Fprintf(&b, "fallback = \"R%d\"\n", i/3*3)
		}
	}
	return b.String()
}

// A lazy manifest answers every lookup as the whole one does, and holds
// nothing it was not asked for.
func TestLazyManifestAnswersAsTheWholeOne(t *testing.T) {
	home, stateDir := t.TempDir(), t.TempDir()
	file := filepath.Join(home, "m.toml")
	if err := os.WriteFile(file, []byte(fleet(300)), 0o644); err != nil {
		t.Fatal(err)
	}
	whole, err := manifest.LoadDecoded(file, home, stateDir, false)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := manifest.LoadDecoded(file, home, stateDir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	if lazy.Tools != nil || lazy.Models != nil || lazy.Builds != nil || lazy.Packages != nil {
		t.Fatal("a lazy manifest read its entries at load")
	}
	if lazy.Generation() != whole.Generation() {
		t.Error("lazy and whole manifests of one file have different generations")
	}
	for _, i := range []int{0, 1, 150, 299, 300} {
		for _, c := range []struct {
			what      string
			lazy, old any
		}{
			{"tool", lazy.Tool(fmt.Sprintf("t%d", i)), whole.Tool(fmt.Sprintf("t%d", i))},
			{"build", lazy.Build(fmt.Sprintf("b%d", i)), whole.Build(fmt.Sprintf("b%d", i))},
			{"package", lazy.Package(fmt.Sprintf("cmd%d", i)), whole.Package(fmt.Sprintf("cmd%d", i))},
			{"model", lazy.ModelByFile(fmt.Sprintf("/x/m%d.gguf", i)), whole.ModelByFile(fmt.Sprintf("/x/m%d.gguf", i))},
			{"role", lazy.ModelByRole(fmt.Sprintf("R%d", i)), whole.ModelByRole(fmt.Sprintf("R%d", i))},
		} {
			if !equalJSON(t, c.lazy, c.old) {
				t.Errorf("%s %d differs", c.what, i)
			}
		}
		if m := lazy.ModelByFile(fmt.Sprintf("m%d.gguf", i)); m != nil {
			if !equalJSON(t, lazy.FallbackModel(m), whole.FallbackModel(whole.ModelByFile(m.File))) {
				t.Errorf("fallback of model %d differs", i)
			}
		}
	}
	// One model, one pointer: a model and its fallback compare as in a
	// whole manifest.
	if m := lazy.ModelByFile("m3.gguf"); m != lazy.ModelByFile("m3.gguf") || m != lazy.ModelByRole("R3") {
		t.Error("the same model read twice is two models")
	}
	if got, want := lazy.ToolNames(), whole.ToolNames(); !slices.Equal(got, want) || len(got) != 300 {
		t.Errorf("ToolNames: %d names, want %d", len(got), len(want))
	}
}

// decodedFleet writes a manifest of n tools and loads it once, so that the
// decoded file is there; good is that file's bytes.
func decodedFleet(t *testing.T, n int) (home, stateDir, file, decoded string, good []byte) {
	t.Helper()
	home, stateDir = t.TempDir(), t.TempDir()
	file = filepath.Join(home, "m.toml")
	if err := os.WriteFile(file, []byte(fleet(n)), 0o644); err != nil {
		t.Fatal(err)
	}
	decoded = state.Layout{Dir: stateDir}.DecodedManifest()
	if _, err := manifest.LoadDecoded(file, home, stateDir, false); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(decoded)
	if err != nil {
		t.Fatal(err)
	}
	return home, stateDir, file, decoded, good
}

// A decoded file cut short (a sandbox truncating files) or with an entry
// that does not read back is never trusted: the load or the lookup falls
// back to the whole manifest or to the TOML.
func TestLazyManifestSurvivesADamagedFile(t *testing.T) {
	home, stateDir, file, decoded, good := decodedFleet(t, 50)

	// Cut short: the load reads the TOML and writes the file again.
	os.WriteFile(decoded, good[:len(good)-100], 0o600)
	m, err := manifest.LoadDecoded(file, home, stateDir, true)
	if err != nil || m.Tool("t7") == nil || m.Tool("t7").Build != "b7" {
		t.Fatalf("after a cut: %v %v", m, err)
	}
	m.Close()
	if again, _ := os.ReadFile(decoded); string(again) != string(good) {
		t.Error("the cut file was not written again")
	}

	// An entry damaged in place, same size: that lookup is answered from
	// the whole manifest.
	i := strings.Index(string(good), "t:t7\x00")
	if i < 0 {
		t.Fatal("no entry t:t7 in the decoded file")
	}
	bad := []byte(string(good))
	copy(bad[i+len("t:t7\x00"):], "\xff\xff\xff")
	os.WriteFile(decoded, bad, 0o600)
	m, err = manifest.LoadDecoded(file, home, stateDir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if tool := m.Tool("t7"); tool == nil || tool.Build != "b7" || tool.Name != "t7" {
		t.Errorf("damaged entry: %+v", tool)
	}
	if m.Tool("t8") == nil || m.Tool("nope") != nil {
		t.Error("lookups after a damaged entry")
	}
}

// BenchmarkLoadDecoded is what a call pays to read its tool from the
// decoded manifest (lazy) with 1 and 10,000 tools, builds, packages and
// models in it, and what a command pays to read a small one whole.
func BenchmarkLoadDecoded(b *testing.B) {
	for _, n := range []int{1, 10000} {
		home, stateDir := b.TempDir(), b.TempDir()
		file := filepath.Join(home, "m.toml")
		if err := os.WriteFile(file, []byte(fleet(n)), 0o644); err != nil {
			b.Fatal(err)
		}
		if _, err := manifest.LoadDecoded(file, home, stateDir, false); err != nil {
			b.Fatal(err)
		}
		for _, lazy := range []bool{false, true} {
			if !lazy && n > 1 {
				continue // the commands' cost grows with the manifest, as it must
			}
			b.Run(fmt.Sprintf("tools=%d/lazy=%v", n, lazy), func(b *testing.B) {
				for b.Loop() {
					m, err := manifest.LoadDecoded(file, home, stateDir, lazy)
					if err != nil || m.Tool("t0") == nil {
						b.Fatal(err)
					}
					m.Close()
				}
			})
		}
	}
}

// What is at the decoded manifest's path is not always a decoded manifest
// (state folders can be shared): a file far larger than any decoded
// manifest whose header claims a key of 512 MiB, a symlink, a FIFO. None
// may hang the call, make it allocate or read the claimed size, or be
// followed: the call reads the manifest from the TOML, and the decoded file
// is written again in its place.
func TestDecodedFileThatIsNotOne(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		for _, plant := range []string{"oversized", "symlink", "fifo"} {
			t.Run(fmt.Sprintf("%s/lazy=%v", plant, lazy), func(t *testing.T) { testDecodedFileThatIsNotOne(t, plant, lazy) })
		}
	}
}

func testDecodedFileThatIsNotOne(t *testing.T, plant string, lazy bool) {
	home, stateDir, file, decoded, good := decodedFleet(t, 3)
	os.Remove(decoded)
	// The link's target is the good decoded file itself: a load that
	// followed it would answer right, but leave the link in place.
	target := filepath.Join(t.TempDir(), "elsewhere")
	switch plant {
	case "oversized":
		const huge = 512 << 20
		f, err := os.OpenFile(decoded, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 32)
		copy(head, good[:8]) // the magic
		binary.LittleEndian.PutUint64(head[8:], huge)
		binary.LittleEndian.PutUint32(head[16:], huge-64) // the key's length
		binary.LittleEndian.PutUint32(head[28:], 1)       // one slot
		_, err = f.Write(head)
		if err == nil {
			err = f.Truncate(huge)
		}
		if err := errors.Join(err, f.Close()); err != nil {
			t.Fatal(err)
		}
	case "symlink":
		if err := os.WriteFile(target, good, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, decoded); err != nil {
			t.Fatal(err)
		}
	case "fifo":
		if err := syscall.Mkfifo(decoded, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	go func() {
		m, err := manifest.LoadDecoded(file, home, stateDir, lazy)
		if err == nil {
			if tool := m.Tool("t1"); tool == nil || tool.Build != "b1" {
				err = fmt.Errorf("tool t1 is %+v", tool)
			}
			m.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the load hangs")
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("the load allocated %d MiB", grew>>20)
	}
	fi, err := os.Lstat(decoded)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(len(good)) {
		t.Errorf("the decoded file was not written again: %v %v", fi, err)
	}
	if plant == "symlink" {
		if got, err := os.ReadFile(target); err != nil || string(got) != string(good) {
			t.Errorf("the link's target changed: %v", err)
		}
	}
}
