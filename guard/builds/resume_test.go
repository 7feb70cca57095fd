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

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/manifest"
)

// manyUnits is how many translation units the resume tests' project
// compiles (besides main.c); its build is held at the middle one.
const manyUnits = 20

// stopUnit is the unit the first run never gets past: the launcher blocks
// there until guard (or the test) ends the build.
var stopUnit = unitName(manyUnits/2 + 1)

func unitName(i int) string { return fmt.Sprintf("t%02d.c", i) }

// manyProject writes a CMake project of manyUnits + 1 translation units
// into a new folder, and the compiler launcher that counts them: it
// appends each unit's name to $COUNT once the compiler has made it, and
// when $STOP_AT names the unit it is asked for, it writes its pid to
// $STOP_FILE and sleeps (as a long compile would) instead of compiling.
// CMake takes the launcher from CMAKE_C_COMPILER_LAUNCHER in the
// environment, which also keeps the Builder from putting ccache there.
func manyProject(t *testing.T) (src, launcher string) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "many")
	var units, calls strings.Builder
	for i := 1; i <= manyUnits; i++ {
		fmt.Fprintf(&units, " %s", unitName(i))
		guardtest.WriteFile(t, filepath.Join(src, unitName(i)), fmt.Sprintf("int f%02d(void) { return %d; }\n", i, i), 0o644)
		fmt.Fprintf(&calls, "int f%02d(void);\n", i)
	}
	guardtest.WriteFile(t, filepath.Join(src, "main.c"), calls.String()+"int main(void) { return f01() - 1; }\n", 0o644)
	guardtest.WriteFile(t, filepath.Join(src, "CMakeLists.txt"), fmt.Sprintf(`cmake_minimum_required(VERSION 3.17)
project(many C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_executable(many main.c%s)
`, units.String()), 0o644)
	launcher = filepath.Join(filepath.Dir(src), "count-cc")
	guardtest.WriteFile(t, launcher, `#!/bin/sh
for a; do case $a in *.c) unit=${a##*/};; esac; done
if [ -n "$STOP_AT" ] && [ "$unit" = "$STOP_AT" ]; then
  echo $$ > "$STOP_FILE.tmp" && mv "$STOP_FILE.tmp" "$STOP_FILE"
  exec sleep 600
fi
"$@" || exit
[ -z "$unit" ] || echo "$unit" >> "$COUNT"
`, 0o755)
	return src, launcher
}

// manyRecipe builds the project in dir one compile at a time, so that the
// build held at stopUnit has compiled exactly the units before it.
func manyRecipe(dir string) *manifest.Build {
	return &manifest.Build{
		Name:    "many",
		Dir:     dir,
		Steps:   [][]string{{"cmake", "-B", "build", "-DCMAKE_BUILD_TYPE=Release"}, {"cmake", "--build", "build", "-j1"}},
		Outputs: []string{manifest.DefaultOutput},
	}
}

// compiles reads the launcher's record: how many times each unit was
// compiled. Only the project's units count (CMake's own checks compile
// other files).
func compiles(t *testing.T, count string) map[string]int {
	t.Helper()
	data, err := os.ReadFile(count)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, unit := range strings.Fields(string(data)) {
		if unit == "main.c" || strings.HasPrefix(unit, "t") {
			n[unit]++
		}
	}
	return n
}

// checkCompiledOnce fails unless every unit of the project was compiled
// exactly once, except those in twice (compiled twice).
func checkCompiledOnce(t *testing.T, n map[string]int, twice ...string) {
	t.Helper()
	units := []string{"main.c"}
	for i := 1; i <= manyUnits; i++ {
		units = append(units, unitName(i))
	}
	for _, u := range units {
		want := 1
		if slices.Contains(twice, u) {
			want = 2
		}
		if n[u] != want {
			t.Errorf("%s compiled %d times over both runs, want %d (all: %v)", u, n[u], want, n)
		}
	}
}

// objectOf is the object file CMake writes for unit.
func objectOf(src, unit string) string {
	return filepath.Join(src, "build", "CMakeFiles", "many.dir", unit+".o")
}

// A build that guard's own limit stops at half ends within the grace (the
// launcher's sleep and make go on SIGTERM): a clean stop. The next build
// scrubs nothing and compiles only what is left, so over both runs each
// unit is compiled once. The limit is a bound the build must reach half
// within; on a machine too loaded for it the test starts over with a
// longer one instead of measuring a stop before any compile.
func TestResumeAfterTheLimit(t *testing.T) {
	requireCmake(t)
	for limit := 10 * time.Second; ; limit *= 2 {
		if limit > 80*time.Second {
			t.Fatal("the build never reached its middle unit within its limit")
		}
		src, launcher := manyProject(t)
		dir := filepath.Dir(src)
		count, stop := filepath.Join(dir, "count"), filepath.Join(dir, "stop")
		b, stderr, _ := newBuilder(t, "")
		base := append(b.Env, "CMAKE_C_COMPILER_LAUNCHER="+launcher, "COUNT="+count)
		b.Env = append(base, "STOP_AT="+stopUnit, "STOP_FILE="+stop)
		rec := manyRecipe(src)
		rec.Timeout = manifest.Duration(limit)
		err := b.Build(context.Background(), "many", rec, "")
		if _, statErr := os.Stat(stop); statErr != nil {
			t.Logf("the %s limit stopped the build before its middle (%v); again with a longer one", limit, err)
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "a clean stop, everything built so far is kept") {
			t.Fatalf("first run: %v; want the limit's clean stop", err)
		}
		if _, err := os.Stat(b.MarkerPath("many")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a clean stop left the interrupted-build marker: %v", err)
		}
		first := compiles(t, count)
		if len(first) != manyUnits/2+1 { // main.c comes first
			t.Fatalf("the first run compiled %v; want main.c and the %d units before %s", first, manyUnits/2, stopUnit)
		}

		b.Env = base
		rec.Timeout = manifest.Duration(5 * time.Minute) // a bound, not an expectation
		target := filepath.Join(src, "build", "bin", "many")
		if err := b.Build(context.Background(), "many", rec, target); err != nil {
			t.Fatalf("resumed build: %v\n%s", err, stderr.String())
		}
		if strings.Contains(stderr.String(), "was interrupted") {
			t.Errorf("the resumed build scrubbed after a clean stop:\n%s", stderr.String())
		}
		checkCompiledOnce(t, compiles(t, count))
		return
	}
}

// A guard SIGKILLed with its steps mid-build (a sandbox stopped) leaves
// its marker, and whatever a compiler was writing cut short: the next
// build removes that object only, keeps every whole one (and CMake's
// configure-time a.out), and compiles again just the one it removed.
func TestResumeAfterSIGKILL(t *testing.T) {
	requireCmake(t)
	src, launcher := manyProject(t)
	dir := filepath.Dir(src)
	count, stop := filepath.Join(dir, "count"), filepath.Join(dir, "stop")
	state := t.TempDir()
	env := append(testEnv(t, ""), "CMAKE_C_COMPILER_LAUNCHER="+launcher, "COUNT="+count)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(env, helperEnv+"=1", "GUARD_BUILDS_TEST_MANY=1", "GUARD_BUILDS_TEST_STATE="+state, "GUARD_BUILDS_TEST_DIR="+src,
		"STOP_AT="+stopUnit, "STOP_FILE="+stop)
	helper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var helperErr guardtest.Buffer
	helper.Stdout, helper.Stderr = &helperErr, &helperErr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()
	var held int
	for deadline := time.Now().Add(3 * time.Minute); held == 0; {
		select {
		case err := <-exited:
			t.Fatalf("the build ended before its middle unit: %v\n%s", err, helperErr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if data, err := os.ReadFile(stop); err == nil {
			fmt.Sscan(string(data), &held)
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-helper.Process.Pid, syscall.SIGKILL)
			t.Fatalf("the build did not reach its middle unit\n%s", helperErr.String())
		}
	}
	steps, err := syscall.Getpgid(held)
	if err != nil {
		t.Fatal(err)
	}
	// The sandbox stops: everything dies at once, guard and its steps.
	_ = syscall.Kill(-helper.Process.Pid, syscall.SIGKILL)
	_ = syscall.Kill(-steps, syscall.SIGKILL)
	<-exited
	waitGone(t, held)

	// What the killed compiler of t03.c left, as a compiler leaves it: the
	// object cut short, written after the marker. t04.c's stays whole.
	cut, whole := objectOf(src, unitName(3)), objectOf(src, unitName(4))
	fi, err := os.Stat(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cut, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	wholeBefore, err := os.Stat(whole)
	if err != nil {
		t.Fatal(err)
	}
	compilerID, err := filepath.Glob(filepath.Join(src, "build", "CMakeFiles", "*", "CompilerIdC", "a.out"))
	if err != nil || len(compilerID) != 1 {
		t.Fatalf("no CompilerIdC/a.out after configure: %v %v", compilerID, err)
	}

	b, stderr, evs := newBuilder(t, "")
	b.StateDir = state
	b.Env = env
	b.HealTimeout = 5 * time.Minute // a bound, not an expectation
	target := filepath.Join(src, "build", "bin", "many")
	if err := b.Build(context.Background(), "many", manyRecipe(src), target); err != nil {
		t.Fatalf("resumed build: %v\n%s", err, stderr.String())
	}
	checkCompiledOnce(t, compiles(t, count), unitName(3))
	if !strings.Contains(stderr.String(), "was interrupted") || !strings.Contains(stderr.String(), "removed 1 output it cut short") {
		t.Errorf("stderr does not say the scrub:\n%s", stderr.String())
	}
	log, _ := os.ReadFile(b.LogPath("many"))
	if !strings.Contains(string(log), "== guard: removed "+cut+" (cut short by the interrupted build: an ELF file cut off") {
		t.Errorf("the build log does not name the removal of %s:\n%s", cut, log)
	}
	if now, err := os.Stat(whole); err != nil || !os.SameFile(wholeBefore, now) || !now.ModTime().Equal(wholeBefore.ModTime()) {
		t.Errorf("the whole object %s was not kept as it was: %v", whole, err)
	}
	if _, err := os.Stat(compilerID[0]); err != nil {
		t.Errorf("CMake's %s was removed: %v", compilerID[0], err)
	}
	if ev := evs.Named("binary.rebuild"); len(ev) == 0 || ev[0].Reason != "interrupted build: removed 1 output it cut short" {
		t.Errorf("binary.rebuild events %+v", ev)
	}
	if _, err := os.Stat(b.MarkerPath("many")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the resumed build left its marker: %v", err)
	}
}
