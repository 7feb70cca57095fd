package guard

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/heallog"
	"golang.org/x/sys/unix"
)

// scaleBed is a whole installed guard in a temp folder, called through
// shim() as cmd/guard calls it (configuration, shim repair, call), with
// exec faked and supervised runs real.
type scaleBed struct {
	t    *testing.T
	w    World
	dir  string
	shim string
}

// newScaleBed writes manifest (with $HOME expanded), links every tool in
// tools in the shim folder as install would, and puts guard's copy there
// (an ELF file, /bin/true, as guard's own copy would be).
func newScaleBed(t *testing.T, manifestTOML string, tools []string) *scaleBed {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	shimDir := filepath.Join(home, ".shim")
	for _, d := range []string{home, shimDir, filepath.Join(dir, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mf := filepath.Join(dir, "manifest.toml")
	if err := os.WriteFile(mf, []byte(strings.ReplaceAll(manifestTOML, "$HOME", home)), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to stand in for guard's copy:", err)
	}
	if err := os.WriteFile(filepath.Join(shimDir, "guard"), self, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each tool name a hard link to guard's copy, as install makes it (an
	// old symlink would be mended as outdated).
	for _, name := range tools {
		if err := os.Link(filepath.Join(shimDir, "guard"), filepath.Join(shimDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	w := World{
		// guard's running executable as the kernel keeps it: a copy in the
		// shim folder cut short must not be copied from itself.
		Env: []string{
			"HOME=" + home,
			"PATH=" + shimDir + ":" + filepath.Join(dir, "bin"),
			"GUARD_MANIFEST=" + mf,
			"GUARD_SHIM_DIR=" + shimDir,
			"GUARD_STATE_DIR=" + filepath.Join(dir, "state"),
			"GUARD_LOG=" + filepath.Join(dir, "selfheal.log"),
		},
		Stdout: &strings.Builder{},
		Stderr: &strings.Builder{},
		Self:   "/bin/true",
	}
	return &scaleBed{t: t, w: w, dir: dir, shim: shimDir}
}

// call is one shim call; exec is recorded, not done.
func (b *scaleBed) call(name string, args ...string) int {
	execed := 0
	status := shim(b.w, name, args, func(string, []string, []string) error { execed++; return nil })
	if status != 0 {
		b.t.Fatalf("%s %v: status %d; stderr %s", name, args, status, b.w.Stderr)
	}
	return execed
}

// allocs is what one healthy call allocates, after two calls that leave
// guard's own files (decoded manifest, stamps, cache) as a call finds them.
func (b *scaleBed) allocs(name string, args ...string) float64 {
	b.call(name, args...)
	b.call(name, args...)
	return testing.AllocsPerRun(20, func() { b.call(name, args...) })
}

// grows says whether many, a call's allocations with a big manifest, grew
// from one, the same call's with the smallest. The slack is 10% (at least
// 2): the race detector makes sync.Pool drop items at random (fmt's and
// zap's pools among them), which moves a count by a few either way, while
// a call that decodes every entry or joins every link's path grows by one
// or more allocations per entry: thousands here.
func grows(one, many float64) bool {
	return many > one+max(2, one/10)
}

// manyTools is a manifest of n tools t0..tn-1 besides jq, and their names.
func manyTools(n int) (string, []string) {
	var m strings.Builder
	names := []string{"jq"}
	m.WriteString("[tools.jq]\nargs = [\"-M\"]\n")
	for i := range n {
		name := fmt.Sprintf("t%d", i)
		names = append(names, name)
		fmt.Fprintf(&m, "\n[tools.%s]\nargs = [\"--flag-%d\"]\nenv = { T%d = \"1\" }\n", name, i, i)
	}
	return m.String(), names
}

// A healthy call costs the same whatever else the manifest holds: it reads
// the called tool's entry of the decoded manifest and the shim folder's
// own state, never every tool's (docs/what-a-call-does.md). Counted in
// allocations, which, unlike time, do not move with a shared machine's
// load: decoding every tool or joining every link's path shows in them.
func TestHealthyCallDoesNotGrowWithTools(t *testing.T) {
	count := func(n int) float64 {
		text, names := manyTools(n)
		b := newScaleBed(t, text, names)
		jq := filepath.Join(b.dir, "bin", "jq")
		if err := os.WriteFile(jq, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if b.call("jq") != 1 {
			t.Fatal("jq was not execed")
		}
		return b.allocs("jq")
	}
	one, many := count(1), count(10000)
	t.Logf("allocations of a call: %.0f with 1 tool, %.0f with 10,000", one, many)
	if grows(one, many) {
		t.Errorf("a healthy call with 10,000 tools allocates %.0f times, with 1 tool %.0f: it grows with the manifest", many, one)
	}
}

// The same for a llama call answered from the prompt cache, with 1 model
// declared and with 50.
func TestCacheHitDoesNotGrowWithModels(t *testing.T) {
	count := func(n int) float64 {
		var m strings.Builder
		m.WriteString("models_dir = \"$HOME/models\"\n\n[tools.llama-completion]\npath = \"$HOME/bin/llama-completion\"\n")
		for i := range n {
			fmt.Fprintf(&m, "\n[[models]]\nfile = \"m%d.gguf\"\nsize = 4096\nrole = \"r%d\"\nurls = [\"https://example.com/m%d.gguf\"]\n", i, i, i)
		}
		b := newScaleBed(t, m.String(), []string{"llama-completion"})
		home := b.w.Getenv("HOME")
		for path, body := range map[string]string{
			"bin/llama-completion": "#!/bin/sh\nprintf 'an answer\\n\\n'\n",
			"models/m0.gguf":       string(guardtest.GGUF(4096)),
		} {
			path = filepath.Join(home, path)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		model := filepath.Join(home, "models", "m0.gguf")
		b.call("llama-completion", "-m", model, "-p", "hi", "-n", "4")
		if got := b.w.Stdout.(*strings.Builder).String(); got != "an answer\n\n" {
			t.Fatalf("first call printed %q", got)
		}
		return b.allocs("llama-completion", "-m", model, "-p", "hi", "-n", "4")
	}
	one, many := count(1), count(50)
	t.Logf("allocations of a cache hit: %.0f with 1 model, %.0f with 50", one, many)
	if grows(one, many) {
		t.Errorf("a cache hit with 50 models declared allocates %.0f times, with 1 model %.0f: it grows with the manifest", many, one)
	}
}

// A call checks every link only when something says it must (the shim
// folder's times, guard's copy's, the manifest's generation), and then
// brings back what is gone, loudly logged, as before.
func TestCallMendsShimsWhenSomethingChanged(t *testing.T) {
	text, names := manyTools(3)
	b := newScaleBed(t, text, names)
	if err := os.WriteFile(filepath.Join(b.dir, "bin", "jq"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(b.shim, "guard")
	whole, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	b.call("jq")
	recreated := func() []string {
		t.Helper()
		events, err := heallog.Read(b.w.Getenv("GUARD_LOG"), 100, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range events {
			if ev.Event == "shim.recreate" {
				got = append(got, ev.Tool)
			}
		}
		os.Remove(b.w.Getenv("GUARD_LOG"))
		return got
	}
	if got := recreated(); len(got) != 0 {
		t.Fatalf("a whole folder was mended: %v", got)
	}

	// A link evicted: the folder's times moved.
	os.Remove(filepath.Join(b.shim, "t1"))
	b.call("jq")
	if got := recreated(); len(got) != 1 || got[0] != "t1" {
		t.Errorf("after an evicted link: recreated %v", got)
	}

	// guard's copy cut short in place: the folder's times did not move,
	// the copy's did.
	if err := os.Truncate(copyPath, 100); err != nil {
		t.Fatal(err)
	}
	// Every name is a hard link to that copy, so every name was cut with
	// it: the mend writes a whole copy and links each name to it again.
	b.call("jq")
	if got := recreated(); !slices.Equal(got, append([]string{"guard"}, names...)) {
		t.Errorf("after a cut copy: recreated %v, want guard and %v", got, names)
	}
	for _, name := range names {
		if !sameFile(filepath.Join(b.shim, name), copyPath) {
			t.Errorf("%s is not a hard link to guard's whole copy after the mend", name)
		}
	}
	if now, _ := os.ReadFile(copyPath); len(now) != len(whole) {
		t.Errorf("copy is %d bytes after the mend, want %d", len(now), len(whole))
	}

	// A tool added to the manifest: linked by the next call.
	mf := b.w.Getenv("GUARD_MANIFEST")
	if err := os.WriteFile(mf, []byte(text+"\n[tools.added]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.call("jq")
	if got := recreated(); len(got) != 1 || got[0] != "added" {
		t.Errorf("after a tool was added: recreated %v", got)
	}
	if !sameFile(filepath.Join(b.shim, "added"), copyPath) {
		t.Errorf("the added tool is not a hard link to guard's copy")
	}

	// And then nothing more to do.
	b.call("jq")
	if got := recreated(); len(got) != 0 {
		t.Errorf("a whole folder was mended again: %v", got)
	}
}

// A healthy llama call looks at its model once: the check that decides
// how long a call may wait for the model's heal (modelWait) is made only
// when the model needs one. Counted in opens of the model file (inotify),
// which no machine's load moves.
func TestHealthyLlamaCallOpensItsModelOnce(t *testing.T) {
	b := newScaleBed(t, "models_dir = \"$HOME/models\"\n\n[tools.llama-completion]\npath = \"$HOME/bin/llama-completion\"\n\n"+
		"[[models]]\nfile = \"m0.gguf\"\nsize = 4096\nurls = [\"https://example.com/m0.gguf\"]\nfallback = \"m1.gguf\"\n\n"+
		"[[models]]\nfile = \"m1.gguf\"\nsize = 4096\nurls = [\"https://example.com/m1.gguf\"]\n", []string{"llama-completion"})
	home := b.w.Getenv("HOME")
	guardtest.WriteFile(t, filepath.Join(home, "bin/llama-completion"), "#!/bin/sh\nprintf 'an answer\\n\\n'\n", 0o755)
	model := filepath.Join(home, "models", "m0.gguf")
	guardtest.WriteFile(t, model, string(guardtest.GGUF(4096)), 0o644)
	args := []string{"-m", model, "-p", "hi", "-n", "4"}
	b.call("llama-completion", args...)
	b.call("llama-completion", args...)

	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skip("no inotify:", err)
	}
	defer unix.Close(fd)
	// With the closes watched too, no two events in a row are the same:
	// inotify folds those into one.
	if _, err := unix.InotifyAddWatch(fd, model, unix.IN_OPEN|unix.IN_CLOSE_NOWRITE); err != nil {
		t.Fatal(err)
	}
	b.call("llama-completion", args...)
	buf := make([]byte, 64*unix.SizeofInotifyEvent)
	n, err := unix.Read(fd, buf)
	if err != nil && err != unix.EAGAIN {
		t.Fatal(err)
	}
	opens := 0
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		if ev.Mask&unix.IN_OPEN != 0 {
			opens++
		}
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	if opens != 1 {
		t.Errorf("a healthy call opened its model %d times, want 1", opens)
	}
}

// sameFile says whether a and b name one file (a hard link).
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
