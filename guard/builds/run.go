package builds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/guard/units"
)

// defaultGrace is how long a step's process group has between SIGTERM and
// SIGKILL once guard stops the build (its limit, a cancel, a signal),
// when the Builder does not say ([budget] grace).
const defaultGrace = 3 * time.Second

func (b *Builder) grace() time.Duration {
	if b.Grace > 0 {
		return b.Grace
	}
	return defaultGrace
}

// errNotFound marks a step whose command is not on PATH.
var errNotFound = errors.New("command not found")

// errKilled marks a step guard stopped whose group still had a live
// process when the grace after SIGTERM ran out: that process was
// SIGKILLed, and what it was writing may be cut short.
var errKilled = errors.New("a process was still running after the grace and was killed")

// run executes argv in dir with env in its own process group, stdin empty,
// stdout and stderr into out. When ctx ends the whole group gets SIGTERM,
// and the grace (Builder.Grace) to end: make and ninja delete the target they
// were writing, and the compilers below them stop. A group that is gone
// within the grace made a clean stop; one with a process still alive then
// is SIGKILLed, and the error wraps errKilled. So no compiler outlives the
// build, and the caller knows whether anything was cut off.
//
// lockFile, when set, is the build lock's open file; the step inherits it
// (as fd 3), so the lock stays held while any process of the step lives,
// even when guard itself is SIGKILLed alone and its group goes on: the next
// call then waits for the orphaned step instead of running the recipe a
// second time in the same folder. guard's Release unlocks it for all
// holders, so a daemon escaping the step cannot keep it past a normal end.
func (b *Builder) run(ctx context.Context, argv []string, dir string, env []string, out io.Writer, lockFile *os.File) error {
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, ok := resolve.LookPath(path, lookupEnv(env, "PATH"))
		if !ok {
			return fmt.Errorf("%s: %w", path, errNotFound)
		}
		path = p
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Args = append([]string(nil), argv...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if lockFile != nil {
		cmd.ExtraFiles = []*os.File{lockFile}
	}
	grace := b.grace()
	var (
		killer *time.Timer
		mu     sync.Mutex
		killed atomic.Bool
	)
	cmd.Cancel = func() error {
		pid := cmd.Process.Pid
		mu.Lock()
		killer = time.AfterFunc(grace, func() {
			killed.Store(true)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		})
		mu.Unlock()
		return syscall.Kill(-pid, syscall.SIGTERM)
	}
	// Bounds Wait when a grandchild keeps the output pipe open.
	cmd.WaitDelay = grace + time.Second
	err := cmd.Run()
	mu.Lock()
	stopping := killer
	mu.Unlock()
	if stopping != nil {
		// The leader is gone; the rest of its group (make below cmake,
		// the compilers below make) has what is left of the grace to end.
		// Its pid is not reused while the group still exists.
		pgid := cmd.Process.Pid
		for groupLive(pgid) && !killed.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		stopping.Stop()
		if groupLive(pgid) {
			killed.Store(true)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil // exited 0; only a leftover grandchild held the pipe
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if killed.Load() {
			return fmt.Errorf("%w: %w (%v)", ctx.Err(), errKilled, err)
		}
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// groupLive reports whether a process of the process group pgid is alive.
// A zombie is not: it writes nothing more, and it stays until a parent
// (or an init that may never) reaps it.
func groupLive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true // cannot tell: the grace runs out and SIGKILL follows
	}
	want := strconv.Itoa(pgid)
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue // gone meanwhile
		}
		// After the command's name: state, ppid, pgrp (proc(5)).
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 2 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// stepError turns a failed step into a *BuildError.
func (b *Builder) stepError(ctx context.Context, index int, argv []string, err error) *BuildError {
	e := &BuildError{Index: index, Step: argv, Status: -1, Err: err, Killed: errors.Is(err, errKilled), Grace: b.grace()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		e.Status = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		}
	}
	if ctx.Err() != nil {
		e.Err = ctx.Err()
	}
	return e
}

// lookPath finds name on the PATH of the builder's environment, so tests and
// callers with their own Env see the same tools the steps will.
func (b *Builder) lookPath(name string) (string, bool) {
	return resolve.LookPath(name, lookupEnv(b.baseEnv(), "PATH"))
}

// lookupEnv returns the last value of key in env, as the kernel's consumers do.
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// maxLogBytes is the size past which a build log is rotated to LOG.1 before
// the next build appends to it.
const maxLogBytes = 8 << 20

func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	f, err := state.OpenLog(path, maxLogBytes)
	if err != nil {
		return nil, fmt.Errorf("open build log: %w", err)
	}
	return f, nil
}

// tailWriter copies a step's output to the log and keeps its last line for
// the progress status and the error message.
type tailWriter struct {
	w io.Writer

	mu      sync.Mutex
	partial []byte
	last    string
	prefix  string
	rep     *progress.Reporter
}

// SetPrefix starts a new step: the status becomes prefix plus its last line.
func (t *tailWriter) SetPrefix(prefix string, rep *progress.Reporter) {
	t.mu.Lock()
	t.prefix, t.rep, t.partial, t.last = prefix, rep, t.partial[:0], ""
	t.mu.Unlock()
	rep.SetStatus(prefix)
}

func (t *tailWriter) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	if i := lastLineEnd(t.partial); i >= 0 {
		if line := units.LastLine(t.partial[:i]); line != "" {
			t.last = line
			if t.rep != nil {
				t.rep.SetStatus(t.prefix + ": " + clip(line, 100))
			}
		}
		t.partial = append(t.partial[:0], t.partial[i+1:]...)
	}
	if len(t.partial) > 4096 { // a huge unterminated line: keep the memory bounded
		t.partial = t.partial[len(t.partial)-1024:]
	}
	return n, err
}

// Last is the last non-empty line seen.
func (t *tailWriter) Last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(t.partial)); s != "" {
		return s
	}
	return t.last
}

func lastLineEnd(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' || b[i] == '\r' {
			return i
		}
	}
	return -1
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
