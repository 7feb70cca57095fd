package scripttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// Main is the TestMain of a package of scripts: it runs the helper
// programs the scripts call by name (heldin, ttyrun: helperPrograms);
// guard itself is a binary buildGuard makes from cmd/guard, put first in
// each script's PATH.
func Main(m *testing.M) {
	commands := map[string]func(){}
	for name, prog := range helperPrograms {
		commands[name] = func() { os.Exit(prog()) }
	}
	testscript.Main(m, commands)
}

// scriptCmds are the custom testscript commands, all of them; each is
// written next to the scripts that use it.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"waitfile":  cmdWaitFile,
	"pidgone":   cmdPidGone,
	"exits":     cmdExits,
	"signalbg":  cmdSignalBg,
	"gguf":      cmdGGUF,
	"cpenv":     cmdCpEnv,
	"groupgone": cmdGroupGone,
	// background.go
	"bgpid":    cmdBgPid,
	"waitgrep": cmdWaitGrep,
	// fleet_cmds.go
	"hostilepush":   cmdHostilePush,
	"registryproxy": cmdRegistryProxy,
	"registrytls":   cmdRegistryTLS,
	// prebuilt_cmds.go
	"ghrelease": cmdGHRelease,
	// llama_cmds.go: the llama, prompt-cache and swarm scripts
	"stdinopen":      cmdStdinOpen,
	"cacheentries":   cmdCacheEntries,
	"corruptentries": cmdCorruptEntries,
	"invalidutf8":    cmdInvalidUTF8,
	"linebefore":     cmdLineBefore,
	// registry_faults.go
	"registryfault": cmdRegistryFault,
	"registrygets":  cmdRegistryGets,
	// server.go: the download server of every script
	"served":    cmdServed,
	"sentbytes": cmdSentBytes,
	"sha256env": cmdSHA256Env,
	"waitsize":  cmdWaitSize,
	"tmpfs":     cmdTmpfs,
	// stash_cmds.go
	"stashcraft": cmdStashCraft,
	"registry":   cmdRegistry,
	"ollamapush": cmdOllamaPush,
}

// buildGuard builds cmd/guard into a folder of the test's, with the race
// detector when this test has it, and returns the folder. The scripts run
// this binary as guard, as a person runs the one install.sh builds.
func buildGuard(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-buildvcs=false", "-o", filepath.Join(dir, "guard")}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/guard")...)
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building guard: %v\n%s", err, out)
	}
	return dir
}

// repoRoot is the module's root: the folder of go.mod above the package
// whose tests run.
func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return dir
}

// Run runs part n of parts of the scripts in testdata/script: every
// parts-th one, in the order of their names, from the n-th (1-based). The
// scripts are spread over packages (part1, part2, ...) so that each has
// go test's time limit for one package to itself.
func Run(t *testing.T, n, parts int) {
	files, err := filepath.Glob(filepath.Join(repoRoot(), "testdata", "script", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/script: %v", err)
	}
	sort.Strings(files)
	var mine []string
	for i, f := range files {
		if i%parts == n-1 {
			mine = append(mine, f)
		}
	}
	bin := buildGuard(t)
	testscript.Run(t, testscript.Params{
		Files:               mine,
		RequireExplicitExec: true,
		Setup:               func(e *testscript.Env) error { return setup(e, bin) },
		Cmds:                scriptCmds,
		Condition:           condition,
	})
}

// condition adds [root]: the process runs as root, so a script can give a
// file to another user.
func condition(cond string) (bool, error) {
	if cond == "root" {
		return os.Geteuid() == 0, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

// cpenv SRC DST: copy SRC to DST with $VARS expanded (a manifest that needs
// $WORK in a URL).
func cmdCpEnv(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: cpenv SRC DST")
	}
	text := os.Expand(ts.ReadFile(args[0]), ts.Getenv)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(text), 0o644))
}

// setup gives every script its own HOME, state, shim folder and log, so no
// test ever touches the real ones, and puts the guard in bin first in PATH.
func setup(e *testscript.Env, bin string) error {
	home := filepath.Join(e.WorkDir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	e.Setenv("HOME", home)
	e.Setenv("GUARD_LOG", filepath.Join(e.WorkDir, "selfheal.log"))
	e.Setenv("GUARD_STATE_DIR", filepath.Join(e.WorkDir, "state"))
	e.Setenv("GUARD_SHIM_DIR", filepath.Join(home, ".shim"))
	e.Setenv("GUARD_MANIFEST", "")
	e.Setenv("GUARD_DEPTH", "")
	e.Setenv("GUARD_PROGRESS_EVERY", "100ms")
	e.Setenv("CI", "")
	// The race detector sleeps 1 s at every exit by default; guard exits a lot.
	e.Setenv("GORACE", "atexit_sleep_ms=0")
	e.Setenv("npm_config_yes", "")
	// OpenClaw's config is found through these (package openclaw): a
	// script never reaches the person's own.
	for _, k := range []string{"OPENCLAW_CONFIG_PATH", "OPENCLAW_STATE_DIR", "OPENCLAW_HOME"} {
		e.Setenv(k, "")
	}
	// No script reaches GitHub's API (prebuilt_cmds.go).
	e.Setenv("GITHUB_API_URL", unreachableAPI)
	e.Setenv("GITHUB_TOKEN", "")
	e.Setenv("GH_TOKEN", "")
	e.Setenv("REPO", repoRoot())
	e.Setenv("PATH", bin+string(os.PathListSeparator)+e.Getenv("PATH"))
	// The orphan check (orphans.go), then the script's own download
	// server (server.go).
	for _, hook := range []func(*testscript.Env) error{noOrphansHook, startModelServer} {
		if err := hook(e); err != nil {
			return err
		}
	}
	return nil
}

// exits N CMD ARGS...: run CMD like exec and require exit status N; its
// stdout and stderr are kept for the stdout and stderr commands after it.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || neg {
		ts.Fatalf("usage: exits N CMD [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: bad status %q", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			got = 128 + int(ws.Signal())
		}
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// signalbg TERM|HUP|INT: send the signal to every background command (the
// built-in kill knows only INT and KILL).
func cmdSignalBg(ts *testscript.TestScript, neg bool, args []string) {
	sigs := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP, "INT": syscall.SIGINT}
	if len(args) != 1 || sigs[args[0]] == 0 {
		ts.Fatalf("usage: signalbg TERM|HUP|INT")
	}
	for _, cmd := range ts.BackgroundCmds() {
		if cmd.Process != nil {
			cmd.Process.Signal(sigs[args[0]])
		}
	}
}

// gguf PATH SIZE: write a small valid GGUF file (magic, version 3) of
// exactly SIZE bytes, like a model the manifest pins.
func cmdGGUF(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: gguf PATH SIZE")
	}
	size, err := strconv.Atoi(args[1])
	if err != nil || size < 8 {
		ts.Fatalf("gguf: bad size %q", args[1])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), guardtest.GGUF(size), 0o644))
}

// waitfile PATH [SECONDS]: wait until PATH exists (default 10 s).
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waitfile PATH [SECONDS]")
	}
	limit := 10 * time.Second
	if len(args) > 1 {
		n, _ := strconv.Atoi(args[1])
		limit = time.Duration(n) * time.Second
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(ts.MkAbs(args[0])); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("%s did not appear within %s", args[0], limit)
}

// pidgone PIDFILE: the process whose pid is in PIDFILE is gone (or a zombie)
// within 5 s. With !, it must still be alive.
func cmdPidGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: pidgone PIDFILE")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	if err != nil {
		ts.Fatalf("bad pid file: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		gone := !guardtest.Alive(pid)
		if gone != neg {
			return
		}
		if time.Now().After(deadline) {
			if neg {
				ts.Fatalf("process %d is gone", pid)
			}
			syscall.Kill(pid, syscall.SIGKILL) // leave nothing behind, then fail
			ts.Fatalf("process %d is still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
