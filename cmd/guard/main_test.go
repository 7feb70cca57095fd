package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sandbox-guard/guard/guard/guardtest"
)

// TestMain lets the test binary be guard. testscript runs it as "guard";
// `guard install` copies it into the shim folder and links tool names to
// the copy, so a link named npx really dispatches on argv[0] here too.
func TestMain(m *testing.M) {
	name := filepath.Base(os.Args[0])
	if !strings.HasSuffix(name, ".test") && name != "guard" && helperPrograms[name] == nil {
		os.Exit(run(os.Args))
	}
	commands := map[string]func(){
		"guard": func() { os.Exit(run(os.Args)) },
	}
	for name, prog := range helperPrograms {
		commands[name] = func() { os.Exit(prog()) }
	}
	testscript.Main(m, commands)
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		Setup:               setup,
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

// scriptCmds are the custom testscript commands; other _test files add
// their own in init.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"waitfile": cmdWaitFile,
	"pidgone":  cmdPidGone,
	"exits":    cmdExits,
	"signalbg": cmdSignalBg,
	"gguf":     cmdGGUF,
	"cpenv":    cmdCpEnv,
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
// test ever touches the real ones.
func setup(e *testscript.Env) error {
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
	e.Setenv("REPO", repoRoot())
	for _, hook := range setupHooks {
		if err := hook(e); err != nil {
			return err
		}
	}
	return nil
}

// setupHooks run after setup for every script; other _test files add their
// own in init (a download server, for example).
var setupHooks []func(*testscript.Env) error

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
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
		gone := !alive(pid)
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

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
