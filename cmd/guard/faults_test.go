package main

// The fault campaign (issue 8): guard killed at random moments, many first
// calls at once, bad input of every kind, and no process left behind. This
// file holds the harness the faults_*_test.go files share: a private guard
// installation per test, run as real processes in their own session so a
// test can kill a call the way a sandbox does (everything at once) or kill
// guard alone, and the checks that nothing is held, orphaned or corrupt.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/manifest"
)

// faultEnv is one private guard installation: HOME, shim folder, state,
// log and manifest all below a temp folder.
type faultEnv struct {
	t        testing.TB
	Dir      string
	Home     string
	ShimDir  string
	StateDir string
	Log      string
	Manifest string
	Bin      string // fake real tools, on PATH after the shim folder
	Guard    string // a link named guard to this test binary, outside the shim folder
	Env      []string
}

// newFaultEnv writes manifest (with $HOME, $BIN and $DIR expanded) and
// installs guard with its links into the shim folder.
func newFaultEnv(t testing.TB, manifest string) *faultEnv {
	t.Helper()
	dir := t.TempDir()
	e := &faultEnv{
		t:        t,
		Dir:      dir,
		Home:     filepath.Join(dir, "home"),
		StateDir: filepath.Join(dir, "state"),
		Log:      filepath.Join(dir, "selfheal.log"),
		Manifest: filepath.Join(dir, "manifest.toml"),
		Bin:      filepath.Join(dir, "bin"),
	}
	e.ShimDir = filepath.Join(e.Home, ".shim")
	for _, d := range []string{e.Home, e.Bin, filepath.Join(dir, "self")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Named guard, this test binary is guard (see TestMain); the link
	// saves copying it, and install copies /proc/self/exe anyway.
	e.Guard = filepath.Join(dir, "self", "guard")
	if err := os.Symlink(self, e.Guard); err != nil {
		t.Fatal(err)
	}
	e.Env = append(faultBaseEnv(),
		// A -race guard otherwise sleeps a second at every exit.
		"GORACE=atexit_sleep_ms=0",
		"HOME="+e.Home,
		"GUARD_SHIM_DIR="+e.ShimDir,
		"GUARD_STATE_DIR="+e.StateDir,
		"GUARD_LOG="+e.Log,
		"GUARD_MANIFEST="+e.Manifest,
		"GUARD_PROGRESS_EVERY=100ms",
		"PATH="+e.ShimDir+":"+e.Bin+":"+os.Getenv("PATH"),
	)
	e.WriteManifest(manifest)
	e.LinkShims()
	return e
}

// LinkShims installs guard the cheap way: what `guard install --no-rc`
// leaves behind (the install marker, a guard and a link per manifest tool
// in the shim folder), with guard a link to this test binary rather than a
// copy of it, which under -race weighs tens of megabytes. install.txtar
// tests the real command.
func (e *faultEnv) LinkShims() {
	e.t.Helper()
	data, err := os.ReadFile(e.Manifest)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := manifest.Parse(e.Manifest, data, e.Home)
	if err != nil {
		return // a test of a bad manifest: the call reports it
	}
	self, _ := os.Readlink(e.Guard)
	for _, d := range []string{e.ShimDir, e.StateDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
	links := map[string]string{"guard": self}
	for name := range m.Tools {
		links[name] = "guard"
	}
	for name, target := range links {
		p := filepath.Join(e.ShimDir, name)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.Symlink(target, p); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.StateDir, "installed"), []byte(e.ShimDir+"\n"), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// cleanEnv is this process's environment without anything that would make
// a guard under test behave differently from a fresh one.
func faultBaseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GUARD_") || k == "HOME" || k == "PATH" || k == "CI" ||
			k == "npm_config_yes" || k == "HF_TOKEN" || k == "WORK" || k == "GORACE" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (e *faultEnv) expand(s string) string {
	return strings.NewReplacer("$HOME", e.Home, "$BIN", e.Bin, "$DIR", e.Dir).Replace(s)
}

// WriteManifest replaces the manifest.
func (e *faultEnv) WriteManifest(text string) {
	e.t.Helper()
	if err := os.WriteFile(e.Manifest, []byte(e.expand(text)), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// Tool writes an executable #!/bin/sh fake real tool into Bin (or at an
// absolute path).
func (e *faultEnv) Tool(name, script string) string {
	e.t.Helper()
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.Bin, name)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+e.expand(script)), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// With returns a copy of e whose calls get extra environment.
func (e *faultEnv) With(kv ...string) *faultEnv {
	c := *e
	c.Env = append(append([]string(nil), e.Env...), kv...)
	return &c
}

// Command is a call of the shim name (or of an absolute path) in its own
// session, so the whole call can be found and killed like a sandbox kills.
func (e *faultEnv) Command(name string, args ...string) *exec.Cmd {
	p := name
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.ShimDir, name)
	}
	cmd := exec.Command(p, args...)
	cmd.Env = e.Env
	cmd.Dir = e.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A child that outlives guard may hold guard's stderr; Wait must not
	// wait for it (the sweep after the call reports it).
	cmd.WaitDelay = time.Second
	return cmd
}

// faultResult is how one call ended.
type faultResult struct {
	Code    int // exit status as a shell reports it (128+N for signal N)
	Stdout  string
	Stderr  string
	Elapsed time.Duration
}

func (r faultResult) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", r.Code, r.Elapsed.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// Run calls the shim name and waits; the call is killed after two minutes
// so a hang fails the test instead of the whole run.
func (e *faultEnv) Run(name string, args ...string) faultResult {
	return e.wait(e.Command(name, args...))
}

// RunPath is Run for an executable outside the shim folder.
func (e *faultEnv) RunPath(path string, args ...string) faultResult {
	return e.wait(e.Command(path, args...))
}

func (e *faultEnv) wait(cmd *exec.Cmd) faultResult {
	e.t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", cmd.Path, err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { guardtest.KillSession(cmd.Process.Pid) })
	cmd.Wait()
	timer.Stop()
	r := faultResult{Code: statusOf(cmd.ProcessState), Stdout: out.String(), Stderr: errb.String(), Elapsed: time.Since(start)}
	sweepSession(e.t, cmd.Process.Pid)
	return r
}

// statusOf is the exit status as a shell reports it: 128+N for signal N.
func statusOf(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// sweepSession fails the test if anything of the call's session is still
// alive a moment after guard exited, and kills it so nothing leaks.
func sweepSession(t testing.TB, sid int) {
	t.Helper()
	left := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.SessionProcs(sid) }, 3*time.Second)
	if len(left) > 0 {
		guardtest.KillSession(sid)
		t.Errorf("guard exited but its call left %d processes running: %s", len(left), guardtest.DescribeProcs(left))
	}
}

// checkLocksFree fails for every lock file below dir that some process
// still holds: a killed guard must never leave one held.
func checkLocksFree(t testing.TB, dir string) (n int) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if !strings.HasSuffix(p, ".lock") && filepath.Base(p) != "stats" {
			return nil
		}
		n++
		f := flock.New(p)
		ok, err := f.TryLock()
		if err != nil || !ok {
			t.Errorf("lock %s is still held (err %v)", p, err)
			return nil
		}
		_ = f.Unlock()
		return nil
	})
	return n
}

// checkLogLines fails when a line of the heal log is not one whole JSON
// object: a kill must never leave a torn line.
func checkLogLines(t testing.TB, path string) (lines int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		lines++
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("heal log line %d is torn: %q", i+1, line)
		}
	}
	return lines
}

// events returns the heal-log events named name (all if name is "").
func logEvents(t testing.TB, path, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) != nil {
			continue
		}
		if name == "" || v["event"] == name {
			out = append(out, v)
		}
	}
	return out
}

// noPanic fails when a call's stderr shows a Go crash rather than guard's
// own message.
func assertNoCrash(t testing.TB, what string, r faultResult) {
	t.Helper()
	for _, sign := range []string{"panic:", "goroutine ", "runtime error", "fatal error:", "SIGSEGV"} {
		if strings.Contains(r.Stderr, sign) {
			t.Errorf("%s: stderr shows a crash (%q):\n%s", what, sign, r.Stderr)
			return
		}
	}
}
