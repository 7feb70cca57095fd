package builds_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// The scrub removes what an interrupted run provably cut short and keeps
// everything whole: the finished objects of a build stopped at half are
// its work, and CMake's configure-time programs are whole ELF files.
func TestScrubPartial(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	since := time.Now().Add(-time.Hour)
	p := realProducts(t)
	elf := "\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 40) // a header cut off
	files := []struct {
		path, data string
		old        bool // modified before the marker
		removed    bool
	}{
		{"build/CMakeFiles/x.dir/whole.c.o", p.obj, false, false},
		{"build/CMakeFiles/x.dir/cut.c.o", p.obj[:len(p.obj)-1], false, true},
		{"build/CMakeFiles/x.dir/half.c.o", p.obj[:len(p.obj)/2], false, true},
		{"build/CMakeFiles/x.dir/unwritten.c.o", strings.Repeat("\x00", 512), false, true},
		{"build/CMakeFiles/x.dir/junk.c.o", "junk", false, false}, // not cut short: not the scrub's to judge
		{"build/CMakeFiles/3.25.1/CompilerIdC/a.out", p.exe, false, false},
		{"build/CMakeFiles/3.25.1/CMakeDetermineCompilerABI_C.bin", p.exe, false, false},
		{"build/bin/tool", p.exe, false, false},
		{"build/bin/cut-tool", p.exe[:len(p.exe)/3], false, true},
		{"build/bin/tool-header", elf, false, true},
		{"build/bin/libx.so", p.exe[:10], false, true},
		{"build/bin/libx.so.1.2.3", p.exe[:100], false, true}, // versioned name
		{"build/bin/empty-tool", "", false, true},             // cut before its first byte
		{"build/bin/empty.o", "", false, true},
		{"build/libstatic.a", p.ar, false, false},
		{"build/libcut.a", p.ar[:len(p.ar)-3], false, true},
		{"build/libmember.a", p.ar[:p.arMember], false, true}, // cut between two members
		{"build/libheader.a", p.ar[:p.arMember+30], false, true},
		{"build/bin/old-tool", p.exe[:10], true, false}, // before the interrupted run
		{"build/CMakeFiles/x.dir/main.c.o.d", "main.c.o: main.c\n", false, false},
		{"build/CMakeFiles/x.dir/link.d", "", false, false},
		{"build/Makefile", "all:\n", false, false},
		{"build/CMakeCache.txt", "", false, false},
		{"main.c", "int main(void) { return 0; }\n", false, false},
		{"empty.h", "", false, false},
		{".gitkeep", "", false, false},
		{"libx.so.txt", "notes", false, false},
		{".git/objects/ab/cdef", "", false, false},
		{"sub/.git/lib.so", elf, false, false},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		guardtest.WriteFile(t, p, f.data, 0o644)
		if f.old {
			old := since.Add(-time.Minute)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Symlinks are never followed, to a file or to a folder.
	guardtest.WriteFile(t, filepath.Join(outside, "lib.so"), elf, 0o755)
	guardtest.WriteFile(t, filepath.Join(outside, "sub", "tool.o"), elf, 0o644)
	for link, to := range map[string]string{"build/bin/link.so": "lib.so", "build/linked-dir": "sub"} {
		if err := os.Symlink(filepath.Join(outside, to), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}

	removed, err := builds.ScrubPartial(dir, since)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		_, statErr := os.Lstat(filepath.Join(dir, f.path))
		if gone := errors.Is(statErr, os.ErrNotExist); gone != f.removed {
			t.Errorf("%s: removed %v, want %v", f.path, gone, f.removed)
		}
		if f.removed {
			want = append(want, filepath.Join(dir, f.path))
		}
	}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("ScrubPartial returned %v; want %v", removed, want)
	}
	for _, p := range []string{"build/bin/link.so", "build/linked-dir"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("symlink %s: %v", p, err)
		}
	}
	for _, p := range []string{"lib.so", "sub/tool.o"} {
		if _, err := os.Stat(filepath.Join(outside, p)); err != nil {
			t.Errorf("a symlink was followed: %s: %v", p, err)
		}
	}
}

// A folder swapped for a symlink while the scrub walks (another process in
// the sandbox, or the build's own leftovers being rewritten) must not lead
// a removal out of the folder being scrubbed.
func TestScrubSurvivesASwappedFolder(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	elf := "\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 40)
	guardtest.WriteFile(t, filepath.Join(dir, "bin", "libx.so"), elf, 0o644)
	victim := filepath.Join(outside, "libx.so")
	guardtest.WriteFile(t, victim, elf, 0o644)
	var swapped bool
	defer builds.SetBeforeScrubRemove(func(path string) {
		if swapped || filepath.Base(path) != "libx.so" {
			return
		}
		swapped = true
		bin := filepath.Dir(path)
		if err := os.Rename(bin, bin+".old"); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(outside, bin); err != nil {
			t.Error(err)
		}
	})()

	_, _ = builds.ScrubPartial(dir, time.Now().Add(-time.Hour)) // the refused removal is an error
	if !swapped {
		t.Fatal("the scrub never came to libx.so")
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the scrub removed a file through a symlink swapped in under it: %v", err)
	}
}

// TestBuildHealsInterruptedBuild is the kill campaign's unhealable case on
// the real fixture: a build killed while the linker wrote leaves a library
// cut short and an executable without its x bit, both newer than their
// inputs, so make alone would trust them forever.
func TestBuildHealsInterruptedBuild(t *testing.T) {
	f := builtFixture(t)
	b, stderr, evs, rec, src, bin, target, ctx := f.b, f.stderr, f.evs, f.rec, f.src, f.bin, f.target, context.Background()
	marker := b.MarkerPath("fixture")
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a finished build left its marker: %v", err)
	}

	// The kill, replayed: everything built so far dates from before the
	// killed run, whose marker is a minute old; its linker left the library
	// and an executable damaged, newer than the marker. A source edited
	// since then is newer too and must stay.
	now := time.Now()
	touch := func(p string, at time.Time) {
		t.Helper()
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			touch(p, now.Add(-2*time.Minute))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	guardtest.WriteFile(t, marker, "pid 1\n", 0o600)
	touch(marker, now.Add(-time.Minute))
	lib := filepath.Join(bin, "libfixture.so")
	if err := os.Truncate(lib, 100); err != nil {
		t.Fatal(err)
	}
	simple := filepath.Join(bin, "llama-simple")
	if err := os.Truncate(simple, 1000); err != nil { // the linker writes its mode last
		t.Fatal(err)
	}
	if err := os.Chmod(simple, 0o644); err != nil {
		t.Fatal(err)
	}
	source := filepath.Join(src, "main.c")
	for _, p := range []string{lib, simple, source} {
		touch(p, now.Add(time.Second))
	}
	obj := filepath.Join(src, "build", "CMakeFiles", "fixture.dir", "fixture.c.o")
	if _, err := os.Stat(obj); err != nil {
		t.Fatal(err)
	}
	if h := builds.CheckBinary(target, b.StampDir(), ""); h.OK || !strings.HasPrefix(h.Reason, "broken library "+lib) {
		t.Fatalf("the truncated library passed the check: %+v", h)
	}

	if err := b.Build(ctx, "llama-completion", rec, target); err != nil {
		t.Fatalf("Build after the interrupted build: %v\nstderr:\n%s", err, stderr.String())
	}
	for _, tool := range []string{target, simple} {
		out, err := exec.Command(tool, "x").Output()
		if err != nil || !strings.Contains(string(out), "arg: x\nlib: libfixture loaded by") {
			t.Fatalf("%s after the heal: %v %q", tool, err, out)
		}
	}
	for _, p := range []string{source, obj} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the scrub removed %s: %v", p, err)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the healing build left its marker: %v", err)
	}
	var cleaned bool
	for _, ev := range evs.Named("binary.rebuild") {
		if ev.Reason == "interrupted build: removed 2 outputs it cut short" && ev.Target == target {
			cleaned = true
		}
	}
	if !cleaned {
		t.Fatalf("no binary.rebuild event for the scrub: %+v", evs.Named("binary.rebuild"))
	}
	if !strings.Contains(stderr.String(), "guard: the last build of fixture was interrupted") {
		t.Fatalf("the scrub is not said on stderr:\n%s", stderr.String())
	}
	log, _ := os.ReadFile(b.LogPath("fixture"))
	if !strings.Contains(string(log), "removed "+lib+" (cut short by the interrupted build") || strings.Contains(string(log), "removed "+obj) {
		t.Fatalf("build log:\n%s", log)
	}
}

// The marker outlives only steps killed before they could clean up: one
// that ends within the grace after guard's SIGTERM is a clean stop, one
// still running after it is SIGKILLed, and the build log and the error say
// which.
func TestBuildMarker(t *testing.T) {
	for _, tt := range []struct {
		name    string
		step    []string
		timeout time.Duration
		kept    bool
		says    string // in the error and the build log
	}{
		{"success", []string{"true"}, 0, false, ""},
		{"failing status", []string{"false"}, 0, false, "exited with status 1"},
		{"command not found", []string{"no-such-command-guard-test"}, 0, false, "command not found"},
		{"heal timeout, clean stop", []string{"sleep", "30"}, 300 * time.Millisecond, false,
			"was stopped by the heal timeout (300ms) and ended within the 300ms grace: a clean stop, everything built so far is kept"},
		// The leader ends at once; a child that shrugs off SIGTERM (an
		// ignored signal stays ignored across exec) is what is killed.
		{"heal timeout, a child ignores SIGTERM", []string{"sh", "-c", "trap '' TERM; sleep 30 & trap - TERM; wait"}, 300 * time.Millisecond, true,
			"and a process still ran after the 300ms grace and was killed: the next build removes what it cut short"},
		{"heal timeout, the leader ignores SIGTERM", []string{"sh", "-c", "trap '' TERM; sleep 30"}, 300 * time.Millisecond, true,
			"and a process still ran after the 300ms grace and was killed"},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 0, true, "was killed by signal 9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, _, _ := newBuilder(t, "")
			b.HealTimeout = tt.timeout
			b.Grace = 300 * time.Millisecond
			rec := &manifest.Build{Name: "m", Dir: t.TempDir(), Steps: [][]string{tt.step}}
			err := b.Build(context.Background(), "x", rec, "")
			if tt.says == "" && err != nil || tt.says != "" && (err == nil || !strings.Contains(err.Error(), tt.says)) {
				t.Errorf("Build = %v; want it to say %q", err, tt.says)
			}
			if log, _ := os.ReadFile(b.LogPath("m")); !strings.Contains(string(log), tt.says) {
				t.Errorf("the build log does not say %q:\n%s", tt.says, log)
			}
			_, statErr := os.Stat(b.MarkerPath("m"))
			if kept := statErr == nil; kept != tt.kept {
				t.Fatalf("marker kept %v, want %v (%v)", kept, tt.kept, statErr)
			}
		})
	}
}

// TestScrubTouchesOnlyOutputs is the case: after a build killed with
// kill -9, the next rebuild removed, anywhere under the recipe's dir, files
// newer than the marker: a .venv's Python binary, a numpy .so, an empty
// py.typed, a notes/TODO. Only the declared output folders are the build's;
// everything else under dir survives, and each removal is in the build log.
func TestScrubTouchesOnlyOutputs(t *testing.T) {
	elf := "\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 40)
	for _, tt := range []struct {
		name    string
		outputs []string
		built   []string // under the output folders: removed
	}{
		{"build/", []string{manifest.DefaultOutput}, []string{"build/bin/libx.so", "build/bin/tool"}},
		{"declared", []string{"out", "cmake-build"}, []string{"out/libx.so", "cmake-build/tool"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, _, evs := newBuilder(t, "")
			dir := t.TempDir()
			kept := map[string]string{
				".venv/bin/python3": elf,
				".venv/lib/python3.11/site-packages/numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so": elf,
				"src/pkg/py.typed": "",
				"notes/TODO":       "",
			}
			if !slices.Contains(tt.outputs, "build") {
				kept["build/bin/libx.so"] = elf // not declared this time: not the build's
			}
			for p, data := range kept {
				guardtest.WriteFile(t, filepath.Join(dir, p), data, 0o755)
			}
			for _, p := range tt.built {
				guardtest.WriteFile(t, filepath.Join(dir, p), elf[:10], 0o644)
			}
			// The killed run's marker dates from before every file above.
			killedRun(t, b, "venv")
			rec := &manifest.Build{Name: "venv", Dir: dir, Outputs: tt.outputs, Steps: [][]string{{"true"}}}
			if err := b.Build(context.Background(), "tool", rec, ""); err != nil {
				t.Fatal(err)
			}
			for p := range kept {
				if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
					t.Errorf("the scrub removed %s, which is not the build's: %v", p, err)
				}
			}
			log, _ := os.ReadFile(b.LogPath("venv"))
			for _, p := range tt.built {
				full := filepath.Join(dir, p)
				if _, err := os.Stat(full); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the scrub left %s, a partial output of the killed build: %v", p, err)
				}
				if !strings.Contains(string(log), "removed "+full+" (cut short by the interrupted build") {
					t.Errorf("the build log does not name the removal of %s:\n%s", p, log)
				}
			}
			want := "interrupted build: removed " + units.Count(len(tt.built), "output", "outputs") + " it cut short"
			if evs := evs.Named("binary.rebuild"); len(evs) == 0 || evs[0].Reason != want {
				t.Errorf("binary.rebuild events %+v, want one saying %q", evs, want)
			}
		})
	}
}

// A symlinked output folder leads out of dir: the scrub does not follow it.
func TestScrubDoesNotFollowALinkedOutput(t *testing.T) {
	b, _, _ := newBuilder(t, "")
	dir, elsewhere := t.TempDir(), t.TempDir()
	elf := "\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 40)
	guardtest.WriteFile(t, filepath.Join(elsewhere, "lib", "libvictim.so"), elf, 0o644)
	if err := os.Symlink(elsewhere, filepath.Join(dir, "build")); err != nil {
		t.Fatal(err)
	}
	killedRun(t, b, "linked")
	rec := &manifest.Build{Name: "linked", Dir: dir, Outputs: []string{"build/lib"}, Steps: [][]string{{"true"}}}
	if err := b.Build(context.Background(), "tool", rec, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "lib", "libvictim.so")); err != nil {
		t.Fatalf("the scrub followed a symlinked output folder: %v", err)
	}
	log, _ := os.ReadFile(b.LogPath("linked"))
	if !strings.Contains(string(log), "is a symlink") {
		t.Errorf("the build log does not say why the output was skipped:\n%s", log)
	}
}

// outputs = [] declares no output folder: a killed build's rerun removes
// nothing, not even under build/, the folder a missing outputs defaults to.
func TestScrubWithNoOutputs(t *testing.T) {
	b, _, evs := newBuilder(t, "")
	dir := t.TempDir()
	elf := "\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 40)
	lib := filepath.Join(dir, "build", "bin", "libx.so")
	guardtest.WriteFile(t, lib, elf[:10], 0o644)
	m, err := manifest.Parse("test.toml", []byte(fmt.Sprintf("[builds.none]\ndir = %q\nsteps = [[\"true\"]]\noutputs = []\n", dir)), "")
	if err != nil {
		t.Fatal(err)
	}
	rec := m.Builds["none"]
	killedRun(t, b, "none")
	if err := b.Build(context.Background(), "tool", rec, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lib); err != nil {
		t.Errorf("the scrub removed %s with no output folder declared: %v", lib, err)
	}
	want := "interrupted build: removed 0 outputs it cut short"
	if evs := evs.Named("binary.rebuild"); len(evs) == 0 || evs[0].Reason != want {
		t.Errorf("binary.rebuild events %+v, want one saying %q", evs, want)
	}
}

// killedRun leaves the marker of a run of recipe name killed a minute ago,
// before every file a test then writes.
func killedRun(t *testing.T, b *builds.Builder, name string) {
	t.Helper()
	marker := b.MarkerPath(name)
	guardtest.WriteFile(t, marker, "pid 1\n", 0o600)
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(marker, old, old); err != nil {
		t.Fatal(err)
	}
}

// products are whole build products made by the system's compiler,
// linker and ar, for the scrub to tell from cut ones.
type products struct {
	obj, exe, ar string
	arMember     int // where the archive's second member begins
}

func realProducts(t *testing.T) products {
	t.Helper()
	dir := t.TempDir()
	guardtest.WriteFile(t, filepath.Join(dir, "a.c"), "int a(void) { return 1; }\n", 0o644)
	guardtest.WriteFile(t, filepath.Join(dir, "b.c"), "int b(void) { return 2; }\nint main(void) { return b() - 2; }\n", 0o644)
	for _, c := range [][]string{
		{"cc", "-c", "a.c", "b.c"},
		{"cc", "-o", "exe", "a.o", "b.o"},
		{"ar", "rcs", "lib.a", "a.o", "b.o"},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	p := products{obj: read("a.o"), exe: read("exe"), ar: read("lib.a")}
	// The members after the symbol table: a.o, then b.o.
	p.arMember = strings.LastIndex(p.ar, "b.o/")
	if p.arMember < 0 {
		t.Fatalf("no member b.o in the archive")
	}
	return p
}

// A FIFO planted among the outputs, named as a product, is never opened
// (an open for reading would wait for a writer) and never removed.
func TestScrubLeavesAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "bin", "libx.so")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	guardtest.Within(t, "the scrub of a folder holding a FIFO", func() {
		if _, err := builds.ScrubPartial(dir, time.Now().Add(-time.Hour)); err != nil {
			t.Error(err)
		}
	})
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO is gone or changed: %v", err)
	}
}

// The grace is the Builder's ([budget] grace) when it sets one.
func TestBuildGraceFromTheBuilder(t *testing.T) {
	b, _, _ := newBuilder(t, "")
	b.HealTimeout, b.Grace = 200*time.Millisecond, 250*time.Millisecond
	rec := &manifest.Build{Name: "g", Dir: t.TempDir(), Steps: [][]string{{"sh", "-c", "trap '' TERM; sleep 30"}}}
	err := b.Build(context.Background(), "x", rec, "")
	if err == nil || !strings.Contains(err.Error(), "a process still ran after the 250ms grace and was killed") {
		t.Fatalf("Build = %v; want the 250ms grace", err)
	}
}

// A linker killed after writing the whole executable but before setting
// its mode leaves a whole ELF file without the execute bit, newer than its
// inputs, which make never relinks: the heal of that target removes it
// first (it is the recipe's own product, in its output folder), so the
// build makes it again. Anything else without the bit stays.
func TestBuildRelinksATargetLeftUnexecutable(t *testing.T) {
	f := builtFixture(t)
	b, stderr, rec, bin, target, ctx := f.b, f.stderr, f.rec, f.bin, f.target, context.Background()
	notes := filepath.Join(bin, "notes.txt")
	guardtest.WriteFile(t, notes, "mine\n", 0o644)
	if err := os.Chmod(target, 0o644); err != nil {
		t.Fatal(err)
	}
	if h := builds.CheckBinary(target, b.StampDir(), ""); h.OK {
		t.Fatalf("a target without its execute bit passed the check")
	}
	if err := b.Build(ctx, "llama-completion", rec, target); err != nil {
		t.Fatalf("Build of the unexecutable target: %v\nstderr:\n%s", err, stderr.String())
	}
	if out, err := exec.Command(target, "x").Output(); err != nil || !strings.Contains(string(out), "arg: x") {
		t.Fatalf("%s after the heal: %v %q", target, err, out)
	}
	if _, err := os.Stat(notes); err != nil {
		t.Fatalf("the heal removed a file that is not its target: %v", err)
	}
	log, _ := os.ReadFile(b.LogPath("fixture"))
	if !strings.Contains(string(log), "removed "+target+" (the target, without its execute bit") {
		t.Fatalf("the removal is not in the build log:\n%s", log)
	}
}

// fixture is a copy of the CMake fixture built once by b.
type fixture struct {
	b        *builds.Builder
	stderr   *guardtest.Buffer
	evs      *guardtest.Recorder
	rec      *manifest.Build
	src, bin string // the copy, and its build/bin
	target   string // its llama-completion
}

// builtFixture copies the CMake fixture and builds it once.
func builtFixture(t *testing.T) fixture {
	t.Helper()
	requireCmake(t)
	src := filepath.Join(t.TempDir(), "llama.cpp")
	if err := copyTree(fixtureSrc, src); err != nil {
		t.Fatal(err)
	}
	b, stderr, evs := newBuilder(t, "")
	b.HealTimeout = 5 * time.Minute // a bound, not an expectation
	f := fixture{b: b, stderr: stderr, evs: evs, rec: fixtureRecipe(src), src: src, bin: filepath.Join(src, "build", "bin")}
	f.target = filepath.Join(f.bin, "llama-completion")
	if err := b.Build(context.Background(), "llama-completion", f.rec, f.target); err != nil {
		t.Fatalf("first build: %v\n%s", err, stderr.String())
	}
	return f
}
