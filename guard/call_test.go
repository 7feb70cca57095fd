package guard

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
)

func TestCallRefusesAShimLoop(t *testing.T) {
	b := newBed(t, "", "GUARD_DEPTH=8")
	if got := b.e.call(context.Background(), "npx", nil); got != 125 {
		t.Errorf("status %d, want 125", got)
	}
	if !strings.Contains(b.stderr.String(), "guard: npx: refused: the call went through shims 8 times in a row (GUARD_DEPTH)") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	if ev := b.event("preflight"); ev["result"] != "refused" || ev["reason"] != "shim loop" {
		t.Errorf("event %v", ev)
	}
	if len(b.execs)+len(b.specs) != 0 {
		t.Error("a refused call ran the tool")
	}
}

func TestCallExecsAToolWithNothingToWatch(t *testing.T) {
	b := newBed(t, "[tools.jq]\nargs = [\"-M\"]\nenv = { JQ_COLORS = \"0\" }\n")
	real := b.tool("bin/jq")
	if got := b.e.call(context.Background(), "jq", []string{".a"}); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if len(b.execs) != 1 || !slices.Equal(b.execs[0], []string{real, "-M", ".a"}) {
		t.Errorf("exec %q", b.execs)
	}
	if len(b.specs) != 0 {
		t.Error("supervised a tool with nothing to watch")
	}
	if _, err := os.Stat(filepath.Join(b.dir, "selfheal.log")); err == nil {
		t.Error("a healthy call opened the heal log")
	}
}

func TestCallNpxGetsYesAndIsSupervised(t *testing.T) {
	b := newBed(t, "[tools.npx]\nargs = [\"--yes\"]\nenv = { npm_config_yes = \"true\" }\nprompts = \"answer\"\n", "GUARD_DEPTH=2")
	real := b.tool("bin/npx")
	if got := b.e.call(context.Background(), "npx", []string{"cowsay", "--yes", "hi"}); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if len(b.specs) != 1 {
		t.Fatalf("%d supervised runs", len(b.specs))
	}
	s := b.specs[0]
	if !slices.Equal(s.Argv, []string{real, "--yes", "cowsay", "--yes", "hi"}) {
		t.Errorf("argv %q", s.Argv)
	}
	if s.Prompts != runner.PromptsAnswer || s.PTY || s.Budget != 0 {
		t.Errorf("spec %+v", s)
	}
	if !slices.Contains(s.Env, "npm_config_yes=true") || !slices.Contains(s.Env, "GUARD_DEPTH=3") {
		t.Errorf("env lacks the tool's variables or the next depth: %q", s.Env)
	}
}

func TestSpecLeavesAPersonTheirPrompts(t *testing.T) {
	b := newBed(t, "")
	b.e.c.StdinTTY, b.e.c.StdoutTTY = true, true
	s := b.e.spec(&manifest.Tool{Name: "npx", Prompts: "answer"}, "/x", []string{"/x"}, nil)
	if s.Prompts != runner.PromptsOff || s.PTY {
		t.Errorf("at a terminal: prompts %q, pty %v", s.Prompts, s.PTY)
	}
	b.e.c.StdinTTY = false
	s = b.e.spec(&manifest.Tool{Name: "npx", Prompts: "answer"}, "/x", []string{"/x"}, nil)
	if s.Prompts != runner.PromptsAnswer || !s.PTY {
		t.Errorf("stdout a terminal, stdin not: prompts %q, pty %v", s.Prompts, s.PTY)
	}
}

func TestCallReportsHowASupervisedRunEnded(t *testing.T) {
	for _, tc := range []struct {
		res    runner.Result
		status int
		event  string
		say    string
	}{
		{runner.Result{Outcome: runner.TimedOut, Elapsed: 5 * time.Second}, 124, "timeout", "jq: stopped after 5.0s: over its time budget of 5.0s"},
		{runner.Result{Outcome: runner.Stalled}, 124, "stall", "jq: stopped: no new output for 2s (the manifest's stall)"},
		{runner.Result{Outcome: runner.PromptKilled, Prompt: "Password: "}, 124, "prompt.detected", `jq: stopped: it waited at an interactive prompt "Password: " that guard will not answer`},
		{runner.Result{Outcome: runner.StartFailed, Err: errors.New("start jq: exec format error")}, 126, "call.end", "jq: start jq: exec format error"},
		{runner.Result{Outcome: runner.Exited, Code: 3, Answered: []runner.Answer{{Prompt: "Ok? (y)", Reply: "y"}}}, 3, "prompt.detected", `jq: answered y to "Ok? (y)"`},
		{runner.Result{Outcome: runner.Signaled, Signal: syscall.SIGKILL}, 137, "", ""},
	} {
		t.Run(tc.res.Outcome.String(), func(t *testing.T) {
			b := newBed(t, "[tools.jq]\ntimeout = \"5s\"\nstall = \"2s\"\n")
			b.tool("bin/jq")
			b.runs = []runner.Result{tc.res}
			if got := b.e.call(context.Background(), "jq", nil); got != tc.status {
				t.Errorf("status %d, want %d", got, tc.status)
			}
			if !strings.Contains(b.stderr.String(), tc.say) {
				t.Errorf("stderr %q lacks %q", b.stderr.String(), tc.say)
			}
			if tc.event != "" {
				b.event(tc.event)
			} else if evs := b.events(); len(evs) != 0 {
				t.Errorf("logged %v", evs)
			}
		})
	}
}

func TestGuardTimeoutSupervisesAnyTool(t *testing.T) {
	b := newBed(t, "", "GUARD_TIMEOUT=7")
	b.tool("bin/sometool")
	b.e.call(context.Background(), "sometool", []string{"x"})
	if len(b.specs) != 1 || b.specs[0].Budget != 7*time.Second {
		t.Fatalf("specs %+v", b.specs)
	}
}

func TestCallMissingToolWithNoHealIs127(t *testing.T) {
	b := newBed(t, "")
	if got := b.e.call(context.Background(), "nosuch", nil); got != 127 {
		t.Errorf("status %d", got)
	}
	if !strings.Contains(b.stderr.String(), "guard: nosuch: ") || !strings.Contains(b.stderr.String(), "\nguard: no build recipe or package heals it; install it, or give [tools.nosuch] a path, build or package in the manifest\n") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

func TestCallExecFailureIsTheShellsStatus(t *testing.T) {
	b := newBed(t, "")
	b.tool("bin/jq")
	b.e.exec = func(string, []string, []string) error {
		return &os.PathError{Op: "exec", Path: "jq", Err: syscall.EACCES}
	}
	if got := b.e.call(context.Background(), "jq", nil); got != 126 {
		t.Errorf("status %d", got)
	}
	if !strings.Contains(b.stderr.String(), "guard: jq: exec jq: permission denied") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

const buildManifest = `
[builds.fixture]
dir = "$DIR/src"
steps = [["make"]]

[tools.fixture]
path = "$DIR/src/build/fixture"
build = "fixture"
`

func TestCallRebuildsAMissingBinary(t *testing.T) {
	b := newBed(t, buildManifest)
	built := 0
	b.build = func(ctx context.Context, tool string, rec *manifest.Build, target string) error {
		built++
		if tool != "fixture" || rec.Dir != filepath.Join(b.dir, "src") || target != filepath.Join(b.dir, "src/build/fixture") {
			t.Errorf("build %s %+v %s", tool, rec, target)
		}
		b.tool(target)
		return nil
	}
	if got := b.e.call(context.Background(), "fixture", nil); got != 0 || built != 1 {
		t.Fatalf("status %d after %d builds; stderr %s", got, built, b.stderr.String())
	}
	if len(b.execs) != 1 || b.execs[0][0] != filepath.Join(b.dir, "src/build/fixture") {
		t.Errorf("execs %q", b.execs)
	}
}

func TestCallFailedRebuildIs127(t *testing.T) {
	b := newBed(t, buildManifest)
	b.build = func(context.Context, string, *manifest.Build, string) error {
		return errors.New("build fixture failed: exit status 2; log: /x.log")
	}
	if got := b.e.call(context.Background(), "fixture", nil); got != 127 {
		t.Errorf("status %d", got)
	}
	if !strings.Contains(b.stderr.String(), "guard: fixture: build fixture failed: exit status 2; log: /x.log") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

func TestCallBuildThatLeavesTheBinaryBroken(t *testing.T) {
	b := newBed(t, buildManifest)
	b.build = func(_ context.Context, _ string, _ *manifest.Build, target string) error {
		// ELF magic and nothing after it: what a linker killed mid write leaves.
		b.tool(target)
		if err := os.WriteFile(target, []byte("\x7fELF cut short"), 0o755); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	if got := b.e.call(context.Background(), "fixture", nil); got != 127 {
		t.Errorf("status %d", got)
	}
	if !strings.Contains(b.stderr.String(), "after the heal") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

func TestCallRecipeMistakesAreSaid(t *testing.T) {
	b := newBed(t, buildManifest)
	b.e.c.M.Tools["fixture"].Build = "nosuch" // validation refuses this; the engine must not trust it did
	b.e.c.M.Tools["a"] = b.e.c.M.Tools["fixture"]
	b.e.c.M.Tools["a"].Name = "a"
	if got := b.e.call(context.Background(), "a", nil); got != 127 || !strings.Contains(b.stderr.String(), `the manifest names build "nosuch", which it does not define`) {
		t.Errorf("status %d, stderr %q", got, b.stderr.String())
	}
	b = newBed(t, buildManifest)
	b.e.c.M.Tools["fixture"].Path = ""
	if got := b.e.call(context.Background(), "fixture", nil); got != 127 || !strings.Contains(b.stderr.String(), `[tools.fixture] needs a path for build "fixture" to produce`) {
		t.Errorf("status %d, stderr %q", got, b.stderr.String())
	}
}

func TestCallReinstallsAPackage(t *testing.T) {
	b := newBed(t, "[tools.figlet]\npackage = \"figlet\"\n")
	b.apt = func(_ context.Context, tool string, pkgs []string) error {
		if tool != "figlet" || !slices.Equal(pkgs, []string{"figlet"}) {
			t.Errorf("install %s %v", tool, pkgs)
		}
		b.tool("bin/figlet")
		return nil
	}
	if got := b.e.call(context.Background(), "figlet", []string{"hi"}); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
}

func TestASignalDuringAHealEndsTheCall(t *testing.T) {
	b := newBed(t, buildManifest)
	release := make(chan struct{})
	b.build = func(ctx context.Context, _ string, _ *manifest.Build, _ string) error {
		// Until the call has ended: its wait may not listen yet. This
		// heal's own handler (it runs in the test's process) keeps the
		// signal from ending the test.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			syscall.Kill(os.Getpid(), syscall.SIGHUP)
			select {
			case <-release:
				return nil
			case <-tick.C:
			}
		}
	}
	if got := b.e.call(context.Background(), "fixture", nil); got != 128+int(syscall.SIGHUP) {
		t.Errorf("status %d", got)
	}
	close(release)
	// The waiting call ends; the heal goes on, and the line says how to
	// follow it.
	want := "guard: fixture: interrupted by SIGHUP while waiting; the build of fixture goes on in the background; follow it: guard heal --wait fixture\n"
	if b.stderr.String() != want {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

func TestToolHealth(t *testing.T) {
	b := newBed(t, "")
	if h := b.e.ToolHealth(&manifest.Tool{Name: "nope"}); h.OK() || h.Err == nil {
		t.Errorf("missing tool: %+v", h)
	}
	path := b.tool("bin/ok")
	if h := b.e.ToolHealth(&manifest.Tool{Name: "ok"}); !h.OK() || h.Path != path {
		t.Errorf("present tool: %+v", h)
	}
	if _, err := b.e.HealTool(context.Background(), &manifest.Tool{Name: "ok"}); err != nil {
		t.Errorf("HealTool of a healthy tool: %v", err)
	}
}

func TestRepairBringsBackEvictedShims(t *testing.T) {
	b := newBed(t, "[tools.jq]\n")
	shims := filepath.Join(b.home, ".shim")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	b.e.Repair()
	// The name comes back as a hard link to guard's copy (README "Install").
	jq, errJq := os.Stat(filepath.Join(shims, "jq"))
	self, errSelf := os.Stat(filepath.Join(shims, "guard"))
	if errJq != nil || errSelf != nil || !os.SameFile(jq, self) {
		t.Errorf("jq is not a hard link to guard's copy: %v, %v", errJq, errSelf)
	}
	if ev := b.event("shim.recreate"); ev["result"] != "ok" {
		t.Errorf("event %v", ev)
	}
}

func TestRepairSaysWhenItCannotMend(t *testing.T) {
	b := newBed(t, "[tools.jq]\n")
	shims := filepath.Join(b.home, ".shim")
	guardtest.WriteFile(t, shims, "a file where the folder should be", 0o644)
	b.e.Repair()
	if !strings.Contains(b.stderr.String(), "guard: could not mend the shim folder") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

// A heal the call waited on used part of its budget: the run gets the rest,
// as the runner's own budget (which Ctrl-Z pauses), not a deadline.
func TestRunGetsWhatTheHealLeftOfTheBudget(t *testing.T) {
	b := newBed(t, buildManifest+"timeout = \"5s\"\n")
	b.build = func(_ context.Context, _ string, _ *manifest.Build, target string) error {
		time.Sleep(20 * time.Millisecond)
		b.tool(target)
		return nil
	}
	if got := b.e.call(context.Background(), "fixture", nil); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if len(b.specs) != 1 || b.specs[0].Budget >= 5*time.Second || b.specs[0].Budget <= 0 {
		t.Fatalf("run budget after a heal: %+v", b.specs)
	}
	b.specs = nil
	b.e.call(context.Background(), "fixture", nil) // healthy: the whole budget
	if len(b.specs) != 1 || b.specs[0].Budget != 5*time.Second {
		t.Errorf("run budget without a heal: %v", b.specs[0].Budget)
	}
}

// A detached heal stopped by a signal (a SIGTERM to it, not to the call)
// did not fail: the waiting call starts it again and answers, rather than
// end with 127 and "interrupted by SIGTERM while healing".
func TestAHealStoppedBySignalIsStartedAgain(t *testing.T) {
	b := newBed(t, buildManifest)
	built := 0
	b.build = func(_ context.Context, _ string, _ *manifest.Build, target string) error {
		built++
		if built == 1 {
			return &interruptedError{signal: syscall.SIGTERM}
		}
		b.tool(target)
		return nil
	}
	if got := b.e.call(context.Background(), "fixture", nil); got != 0 || built != 2 {
		t.Fatalf("status %d after %d builds; stderr %s", got, built, b.stderr.String())
	}
	if !strings.Contains(b.stderr.String(), "ended without a result; starting it again") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

// The engine's collaborators are built once and shared: every use sees
// the same healer, stash, registry client, speeds and prompt cache, and
// the healer and the stash reach registries through that one client.
func TestCollaboratorsBuiltOnce(t *testing.T) {
	b := newBed(t, "")
	e := b.e
	models, stash, reg, speeds, prompts := e.Models(), e.Stash(), e.Registry(), e.Speeds(), e.PromptCache()
	if models != e.Models() || stash != e.Stash() || reg != e.Registry() ||
		speeds != e.Speeds() || prompts != e.PromptCache() {
		t.Error("a collaborator was built again on a second use")
	}
	if e.Models().Registry != e.Registry() || e.Stash().Registry != e.Registry() {
		t.Error("the model healer or the stash has a registry client of its own")
	}
}
