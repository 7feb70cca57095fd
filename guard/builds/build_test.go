package builds_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/manifest"
)

// TestBuildHealsFixture runs the scenario on the real CMake fixture:
// the build folder is evicted, then the shared library, then a binary while
// ten callers arrive at once.
func TestBuildHealsFixture(t *testing.T) {
	requireCmake(t)
	src := filepath.Join(t.TempDir(), "llama.cpp")
	if err := copyTree(fixtureSrc, src); err != nil {
		t.Fatal(err)
	}
	b, stderr, evs := newBuilder(t, "")
	b.HealTimeout = 5 * time.Minute // a bound, not an expectation
	rec := fixtureRecipe(src)
	target := filepath.Join(src, "build", "bin", "llama-completion")
	ctx := context.Background()
	stepRuns := func() int {
		data, _ := os.ReadFile(b.LogPath("fixture"))
		return strings.Count(string(data), "$ cmake -B build")
	}
	build := func(t *testing.T, wantReason string) {
		t.Helper()
		if err := b.Build(ctx, "llama-completion", rec, target); err != nil {
			t.Fatalf("Build: %v\nstderr:\n%s", err, stderr.String())
		}
		if h := builds.CheckBinary(target, b.StampDir(), ""); !h.OK {
			t.Fatalf("after Build: %+v", h)
		}
		out, err := exec.Command(target, "-p", "hi there").Output()
		if err != nil || string(out) != "arg: -p\narg: hi there\nlib: libfixture loaded by llama-completion\n\n" { // the fixture ends with llama-completion's blank line
			t.Fatalf("rebuilt tool: %v %q", err, out)
		}
		ev := evs.Named("binary.rebuild")
		if len(ev) == 0 {
			t.Fatal("no binary.rebuild event")
		}
		last := ev[len(ev)-1]
		if last.Result != "ok" || last.Reason != wantReason || last.Target != target || last.Tool != "llama-completion" {
			t.Fatalf("binary.rebuild event = %+v; want result ok, reason %q", last, wantReason)
		}
	}

	t.Run("build folder evicted", func(t *testing.T) {
		build(t, "missing")
		if !strings.Contains(stderr.String(), "guard: rebuilding fixture") || !strings.Contains(stderr.String(), "guard: rebuilt fixture in") {
			t.Fatalf("rebuild not visible on stderr:\n%s", stderr.String())
		}
	})

	t.Run("library evicted", func(t *testing.T) {
		if err := os.Remove(filepath.Join(src, "build", "bin", "libfixture.so")); err != nil {
			t.Fatal(err)
		}
		if h := builds.CheckBinary(target, b.StampDir(), ""); h.OK || h.Reason != "missing library libfixture.so" {
			t.Fatalf("evicted library not detected: %+v", h)
		}
		build(t, "missing library libfixture.so")
	})

	t.Run("healthy target is not rebuilt", func(t *testing.T) {
		runs := stepRuns()
		if err := b.Build(ctx, "llama-completion", rec, target); err != nil {
			t.Fatal(err)
		}
		if stepRuns() != runs {
			t.Fatal("a healthy target was rebuilt")
		}
	})

	t.Run("binary evicted, ten callers at once build once", func(t *testing.T) {
		if err := os.Remove(target); err != nil {
			t.Fatal(err)
		}
		runs := stepRuns()
		start := make(chan struct{})
		errs := make(chan error, 10)
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs <- b.Build(ctx, "llama-completion", rec, target)
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		build(t, "missing") // healthy now: checks the tool's output, builds nothing
		if n := stepRuns() - runs; n != 1 {
			t.Fatalf("the steps ran %d times; want once", n)
		}
		if !strings.Contains(stderr.String(), "guard: another process is building fixture; waiting") {
			t.Fatalf("no waiter notice on stderr:\n%s", stderr.String())
		}
		if len(evs.Named("lock.wait")) == 0 {
			t.Fatal("no lock.wait event")
		}
	})
}

func TestBuildFailingStep(t *testing.T) {
	dir := t.TempDir()
	b, _, evs := newBuilder(t, "")
	rec := &manifest.Build{Name: "broken", Dir: dir, Steps: [][]string{
		{"echo", "compiling something"},
		{"sh", "-c", "echo 'error: it broke' >&2; exit 3"},
		{"echo", "never runs"},
	}}
	err := b.Build(context.Background(), "llama-simple", rec, filepath.Join(dir, "bin", "tool"))
	var be *builds.BuildError
	if !errors.As(err, &be) {
		t.Fatalf("want *BuildError, got %T %v", err, err)
	}
	if be.Index != 2 || be.Status != 3 || be.Log != b.LogPath("broken") || be.Last != "error: it broke" {
		t.Fatalf("BuildError = %+v", be)
	}
	msg := err.Error()
	for _, want := range []string{"build broken: step 2/3", "exited with status 3", "error: it broke", b.LogPath("broken")} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	log, _ := os.ReadFile(be.Log)
	if !strings.Contains(string(log), "compiling something") || strings.Contains(string(log), "never runs") {
		t.Fatalf("build log:\n%s", log)
	}
	if ev := evs.Named("binary.rebuild"); len(ev) != 1 || ev[0].Result != "failed" || ev[0].Reason != "missing" {
		t.Fatalf("events = %+v", ev)
	}
}

func TestBuildStepsPassTargetStillBroken(t *testing.T) {
	dir := t.TempDir()
	b, _, _ := newBuilder(t, "")
	rec := &manifest.Build{Name: "noop", Dir: dir, Steps: [][]string{{"true"}}}
	target := filepath.Join(dir, "tool")
	err := b.Build(context.Background(), "x", rec, target)
	var be *builds.BuildError
	if !errors.As(err, &be) || be.Target != target || be.Reason != "missing" {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "still unhealthy") {
		t.Fatalf("message: %v", err)
	}
}

func TestBuildTimeoutKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	// The whole group ignores SIGTERM, so only the SIGKILL escalation ends it.
	guardtest.WriteFile(t, filepath.Join(dir, "slow.sh"), "trap '' TERM\nsleep 30 &\necho $! > "+pidFile+"\necho started\nwait\n", 0o644)
	b, _, evs := newBuilder(t, "")
	b.Grace = 200 * time.Millisecond
	b.HealTimeout = 300 * time.Millisecond
	rec := &manifest.Build{Name: "slow", Dir: dir, Steps: [][]string{{"sh", "slow.sh"}}}
	start := time.Now()
	err := b.Build(context.Background(), "x", rec, filepath.Join(dir, "tool"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("Build returned after %s", took)
	}
	if !strings.Contains(err.Error(), "heal timeout") {
		t.Fatalf("message: %v", err)
	}
	if ev := evs.Named("binary.rebuild"); len(ev) != 1 || ev[0].Result != "timeout" {
		t.Fatalf("events = %+v", ev)
	}
	data, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	waitGone(t, pid)
}

// waitGone waits until pid has exited (a zombie counts: in a container the
// reaper may be slow).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("grandchild %d outlived the build", pid)
}

func TestBuildSourceMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone", "llama.cpp")
	steps := [][]string{{"true"}}

	t.Run("no repo", func(t *testing.T) {
		b, _, _ := newBuilder(t, "")
		err := b.Build(context.Background(), "x", &manifest.Build{Name: "l", Dir: missing, Steps: steps}, filepath.Join(missing, "tool"))
		if err == nil || !strings.Contains(err.Error(), "source folder "+missing+" is missing") {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("no git", func(t *testing.T) {
		b, _, _ := newBuilder(t, t.TempDir()) // PATH without git
		rec := &manifest.Build{Name: "l", Dir: missing, Repo: "https://github.com/ggml-org/llama.cpp", Steps: steps}
		err := b.Build(context.Background(), "x", rec, filepath.Join(missing, "tool"))
		want := "git clone --depth 1 https://github.com/ggml-org/llama.cpp " + missing
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v; want the hint %q", err, want)
		}
	})

	t.Run("clone fails", func(t *testing.T) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Fatal("git is not installed; this test needs it: apt-get install -y git")
		}
		b, _, _ := newBuilder(t, "")
		rec := &manifest.Build{Name: "l", Dir: missing, Repo: "file://" + filepath.Join(t.TempDir(), "no-repo"), Steps: steps}
		err := b.Build(context.Background(), "x", rec, filepath.Join(missing, "tool"))
		var be *builds.BuildError
		if !errors.As(err, &be) || be.Index != 0 || !strings.Contains(err.Error(), "build l: clone (git clone --depth 1") {
			t.Fatalf("got %v", err)
		}
		entries, _ := os.ReadDir(filepath.Dir(missing))
		if len(entries) != 0 {
			t.Fatalf("a failed clone left %v behind", entries)
		}
	})

	t.Run("clone", func(t *testing.T) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Fatal("git is not installed; this test needs it: apt-get install -y git")
		}
		repo := filepath.Join(t.TempDir(), "repo")
		guardtest.WriteFile(t, filepath.Join(repo, "make-tool.sh"), "mkdir -p out\nprintf '#!/bin/sh\\necho built\\n' > out/tool\nchmod 755 out/tool\n", 0o644)
		b, _, _ := newBuilder(t, "")
		for _, argv := range [][]string{
			{"git", "init", "-q"},
			{"git", "add", "."},
			{"git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fixture"},
		} {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir, cmd.Env = repo, b.Env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", argv, err, out)
			}
		}
		dir := filepath.Join(t.TempDir(), "src", "tool")
		rec := &manifest.Build{Name: "tool", Dir: dir, Repo: "file://" + repo, Steps: [][]string{{"sh", "make-tool.sh"}}}
		if err := b.Build(context.Background(), "tool", rec, filepath.Join(dir, "out", "tool")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestBuildCcacheLauncher(t *testing.T) {
	for _, withCcache := range []bool{true, false} {
		bin := t.TempDir()
		if err := os.Symlink("/usr/bin/env", filepath.Join(bin, "env")); err != nil {
			t.Fatal(err)
		}
		if withCcache {
			guardtest.WriteFile(t, filepath.Join(bin, "ccache"), "#!/bin/sh\nexec \"$@\"\n", 0o755)
		}
		b, _, _ := newBuilder(t, bin)
		rec := &manifest.Build{Name: "env", Dir: t.TempDir(), Steps: [][]string{{"env"}}}
		if err := b.Build(context.Background(), "x", rec, ""); err != nil {
			t.Fatal(err)
		}
		log, _ := os.ReadFile(b.LogPath("env"))
		for _, v := range []string{"CMAKE_C_COMPILER_LAUNCHER=ccache", "CMAKE_CXX_COMPILER_LAUNCHER=ccache"} {
			if strings.Contains(string(log), v) != withCcache {
				t.Errorf("ccache on PATH %v: %s in the steps' environment = %v", withCcache, v, !withCcache)
			}
		}
	}
}

func TestBuildBadRecipes(t *testing.T) {
	b, _, _ := newBuilder(t, "")
	for _, rec := range []*manifest.Build{
		nil,
		{Name: "x", Dir: t.TempDir()},
		{Name: "x", Steps: [][]string{{"true"}}},
		{Name: "x", Dir: t.TempDir(), Steps: [][]string{{}}},
		{Name: "x", Dir: t.TempDir(), Steps: [][]string{{"no-such-command-guard-test"}}},
	} {
		if err := b.Build(context.Background(), "x", rec, ""); err == nil {
			t.Errorf("Build(%+v) succeeded", rec)
		}
	}
}

func TestBuildShowsProgress(t *testing.T) {
	dir := t.TempDir()
	guardtest.WriteFile(t, filepath.Join(dir, "step.sh"), "echo '[ 50%] Building C object main.c.o'\nsleep 1\n", 0o644)
	b, stderr, _ := newBuilder(t, "")
	b.Pace.Every = 20 * time.Millisecond
	rec := &manifest.Build{Name: "prog", Dir: dir, Steps: [][]string{{"true"}, {"sh", "step.sh"}}}
	if err := b.Build(context.Background(), "x", rec, ""); err != nil {
		t.Fatal(err)
	}
	want := "guard: building prog"
	line := "step 2/2 sh: [ 50%] Building C object main.c.o"
	if out := stderr.String(); !strings.Contains(out, want) || !strings.Contains(out, line) {
		t.Fatalf("stderr lacks %q / %q:\n%s", want, line, out)
	}
}

// A heal builds what the manifest's tools run, not every target of the
// project, with every CPU: of the four targets the manifest's tools name,
// the two whose tools this recipe builds, and -j the CPU count. The fake cmake records its arguments; the
// build log shows the step as it ran.
func TestBuildOnlyTheToolsTargets(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	argv := filepath.Join(dir, "argv")
	guardtest.WriteFile(t, filepath.Join(bin, "cmake"), "#!/bin/sh\necho \"$@\" > "+argv+"\n", 0o755)
	m, err := manifest.Parse("m.toml", []byte(fmt.Sprintf(`
[builds.four]
dir = %q
steps = [["cmake", "--build", "build", "--target", "{targets}", "-j{jobs}"]]
[tools.llama-completion]
path = %q
build = "four"
[tools.llama-simple]
path = %q
build = "four"
[builds.other]
dir = %q
steps = [["cmake", "--build", "build", "--target", "{targets}"]]
[tools.llama-bench]
path = "/other/build/bin/llama-bench"
build = "other"
[tools.llama-simple-chat]
path = "/other/build/bin/llama-simple-chat"
build = "other"
`, dir, filepath.Join(dir, "build", "bin", "llama-completion"), filepath.Join(dir, "build", "bin", "llama-simple"), dir)), "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := newBuilder(t, bin+":/usr/bin:/bin")
	if err := b.Build(context.Background(), "llama-completion", m.Builds["four"], ""); err != nil {
		t.Fatal(err)
	}
	want := "--build build --target llama-completion llama-simple -j" + strconv.Itoa(runtime.NumCPU())
	if got, _ := os.ReadFile(argv); strings.TrimSpace(string(got)) != want {
		t.Errorf("cmake ran with %q, want %q", got, want)
	}
	if log, _ := os.ReadFile(b.LogPath("four")); !strings.Contains(string(log), "$ cmake "+want+"\n") {
		t.Errorf("the build log does not show the step as it ran:\n%s", log)
	}
}

// A stash entry is keyed by the steps with their targets: a recipe whose
// tools change builds something else. The job count is not part of it
// (manifest.Build.ResultSteps).
func TestStashKeyHasTheTargets(t *testing.T) {
	b, _, _ := newBuilder(t, "")
	dir := t.TempDir()
	guardtest.WriteFile(t, filepath.Join(dir, "main.c"), "int main(void) { return 0; }\n", 0o644)
	key := func(targets ...string) string {
		rec := &manifest.Build{Name: "k", Dir: dir, Steps: [][]string{{"make", "{targets}", "-j{jobs}"}}, Targets: targets, Outputs: []string{"build"}}
		k, err := b.StashKey(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		return k.Sum
	}
	if key("a") == key("a", "b") {
		t.Error("recipes building other targets share a stash key")
	}
	if first, again := key("a", "b"), key("a", "b"); first != again {
		t.Error("the same recipe has two stash keys")
	}
}

// A build its caller's deadline stops (not its own limit) does not blame
// the heal timeout, whose value had nothing to do with it.
func TestABuildStoppedByItsCallerDoesNotBlameTheHealTimeout(t *testing.T) {
	dir := t.TempDir()
	guardtest.WriteFile(t, filepath.Join(dir, "slow.sh"), "sleep 30\n", 0o644)
	b, _, _ := newBuilder(t, "")
	b.HealTimeout = 30 * time.Minute
	rec := &manifest.Build{Name: "slow", Dir: dir, Steps: [][]string{{"sh", "slow.sh"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := b.Build(ctx, "x", rec, filepath.Join(dir, "tool"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if strings.Contains(err.Error(), "heal timeout") || !strings.Contains(err.Error(), "was stopped when its caller's time ran out") {
		t.Fatalf("message: %v", err)
	}
}

// A machine without the sources (a fresh one of a fleet, a sandbox that
// evicted the whole dir) clones them, and then restores the entry of
// their revision instead of building: the key needs the sources, so it
// could only be computed after the clone.
func TestBuildRestoresAfterClone(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed; this test needs it: apt-get install -y git")
	}
	repo := filepath.Join(t.TempDir(), "repo")
	guardtest.WriteFile(t, filepath.Join(repo, "tool.c"), "int main(void) { return 0; }\n", 0o644)
	b, stderr, _ := newBuilder(t, "")
	b.Stash = &stash.Store{Dir: filepath.Join(b.StateDir, "stash")}
	for _, argv := range [][]string{
		{"git", "init", "-q"},
		{"git", "add", "."},
		{"git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fixture"},
		{"git", "clone", "-q", repo, filepath.Join(filepath.Dir(repo), "built")},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = repo, b.Env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	// Another machine built this revision and stashed it.
	built := filepath.Join(filepath.Dir(repo), "built")
	tool := "#!/bin/sh\necho stashed\n"
	guardtest.WriteFile(t, filepath.Join(built, "build", "tool"), tool, 0o755)
	steps := [][]string{{"false"}} // a build would fail: only a restore heals
	other := &manifest.Build{Name: "tool", Dir: built, Outputs: []string{"build"}, Steps: steps}
	key, err := b.StashKey(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stash.Save(context.Background(), "tool", key, built, other.Outputs, []string{filepath.Join(built, "build", "tool")}); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "src", "tool")
	rec := &manifest.Build{Name: "tool", Dir: dir, Repo: "file://" + repo, Outputs: []string{"build"}, Steps: steps}
	target := filepath.Join(dir, "build", "tool")
	if err := b.Build(context.Background(), "tool", rec, target); err != nil {
		t.Fatalf("build after the clone: %v\n%s", err, stderr.String())
	}
	if data, err := os.ReadFile(target); err != nil || string(data) != tool {
		t.Errorf("target %q %v, want the stashed tool", data, err)
	}
	if !strings.Contains(stderr.String(), "restored tool from stash") {
		t.Errorf("stderr does not say the restore:\n%s", stderr.String())
	}
}
