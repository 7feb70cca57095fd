package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// child is one started tool with everything guard set up around it. Its
// pid is also its process group id: Setpgid, or setsid under a pty.
type child struct {
	cmd   *exec.Cmd
	pid   int
	enter string  // what Enter sends on the child's stdin
	input *feeder // the child's stdin as guard writes it; nil when guard does not
	copy  *copier // guard's stdin into input

	ttyFD      int // terminal handed to the child as its foreground; -1 when none
	ttyOnce    sync.Once
	restoreRaw func()

	master   *os.File // pty master; nil when piped
	pumpDone chan struct{}
	winch    chan os.Signal
	winchEnd chan struct{}

	releaseOnce sync.Once
	waited      bool
}

// startChild starts the tool described by s, its output going through w.
// runCtx is the context whose end makes exec call Cancel: SIGKILL the group.
func startChild(runCtx context.Context, s Spec, w *watcher) (*child, error) {
	cmd := exec.CommandContext(runCtx, s.Path)
	// Path is already resolved: no lookup in PATH, whatever it looks like.
	cmd.Path, cmd.Err = s.Path, nil
	cmd.Args, cmd.Env, cmd.Dir = s.Argv, s.Env, s.Dir
	cmd.WaitDelay = drainDelay
	c := &child{cmd: cmd, enter: "\n", ttyFD: -1}
	cmd.Cancel = func() error { return c.signal(syscall.SIGKILL) }

	var err error
	if s.PTY {
		err = c.startPTY(s, w)
	} else {
		err = c.startPiped(s, w)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	c.pid = cmd.Process.Pid
	return c, nil
}

func (c *child) startPiped(s Spec, w *watcher) error {
	attr := &syscall.SysProcAttr{Setpgid: true}
	c.cmd.Stdout = sink{w: w, st: outStream, dst: s.Stdout}
	c.cmd.Stderr = sink{w: w, st: errStream, dst: s.Stderr}
	var childIn *os.File
	switch {
	case s.Prompts == PromptsAnswer:
		// Answers need a stdin guard can write to.
		r, wr, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("stdin pipe: %w", err)
		}
		childIn = r
		c.cmd.Stdin = r
		c.input = newFeeder(wr, true)
	case s.Stdin != nil:
		c.cmd.Stdin = s.Stdin
		// A background group reading the terminal is stopped by SIGTTIN:
		// the child gets the terminal while it runs.
		if fd, ok := foregroundTTY(s.Stdin); ok {
			attr.Foreground, attr.Ctty = true, fd
			c.ttyFD = fd
		}
	}
	c.cmd.SysProcAttr = attr
	err := c.cmd.Start()
	if childIn != nil {
		_ = childIn.Close()
	}
	if err != nil {
		// The child may have taken the terminal before its exec failed.
		c.takeTerminal()
		if c.input != nil {
			c.input.shutdown(true)
		}
		return err
	}
	if c.input != nil {
		c.startInput(s.Stdin)
	}
	return nil
}

func (c *child) startPTY(s Spec, w *watcher) error {
	var outFile, errFile *os.File
	if f, ok := s.Stdout.(*os.File); ok {
		outFile = f
	}
	if f, ok := s.Stderr.(*os.File); ok {
		errFile = f
	}
	ws, sizeFrom := terminalSize(outFile, s.Stdin, errFile)
	// pty.StartWithSize makes the child a session leader (setsid) with the
	// pty as its controlling terminal; that is its own process group too.
	master, err := pty.StartWithSize(c.cmd, ws)
	if err != nil {
		return err
	}
	c.master = master
	c.enter = "\r"
	c.input = newFeeder(master, false)
	c.pumpDone = make(chan struct{})
	go pump(master, sink{w: w, st: outStream, dst: s.Stdout}, c.pumpDone)

	if s.Stdin != nil && mayRead(s.Stdin) {
		if fd, ok := fdOf(s.Stdin); ok && term.IsTerminal(fd) {
			// Keys go to the child's terminal as typed; its line
			// discipline, not guard's, turns ^C into SIGINT.
			if st, err := term.MakeRaw(fd); err == nil {
				c.restoreRaw = func() { _ = term.Restore(fd, st) }
			}
		}
		c.startInput(s.Stdin)
	}
	if sizeFrom != nil {
		c.followSize(sizeFrom)
	}
	return nil
}

// startInput copies guard's stdin to the child; with no stdin, or one guard
// cannot read (a terminal guard is in the background of), the child's input
// ends at once.
func (c *child) startInput(stdin *os.File) {
	if stdin != nil && mayRead(stdin) {
		if cp, err := startCopier(stdin, c.input); err == nil {
			c.copy = cp
			return
		}
	}
	c.input.end(nil)
}

// pump copies the pty master to dst until the child side is closed. Reads
// on the master fail with EIO once no process holds the terminal: that is
// the end of output. A failed write to dst does not stop the pump, since a
// terminal never blocks its writer: the output is still observed.
func pump(master *os.File, dst sink, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, 32*1024)
	for {
		n, err := master.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				dst.dst = nil
			}
		}
		if err != nil {
			return
		}
	}
}

// followSize keeps the child's terminal the size of guard's.
func (c *child) followSize(from *os.File) {
	c.winch = make(chan os.Signal, 1)
	c.winchEnd = make(chan struct{})
	signal.Notify(c.winch, syscall.SIGWINCH)
	go func() {
		defer close(c.winchEnd)
		for range c.winch {
			if ws, err := pty.GetsizeFull(from); err == nil {
				_ = pty.Setsize(c.master, ws)
			}
		}
	}()
}

// signal sends sig to the child's whole process group. A group that is
// already gone is not an error.
func (c *child) signal(sig syscall.Signal) error {
	if c.cmd.Process == nil {
		return nil
	}
	err := unix.Kill(-c.cmd.Process.Pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// answer queues a reply on the child's stdin without blocking.
func (c *child) answer(reply string) bool {
	return c.input != nil && c.input.offer([]byte(reply))
}

// takeTerminal gives the terminal back to guard if the child had it.
func (c *child) takeTerminal() {
	if c.ttyFD < 0 {
		return
	}
	c.ttyOnce.Do(func() { _ = takeTerminal(c.ttyFD) })
}

// release undoes everything set up around the child once it has exited:
// terminal ownership and mode, stdin copying, size following, and (under a
// pty) drains the output for at most drain before closing the master.
func (c *child) release(drain time.Duration) {
	c.releaseOnce.Do(func() {
		c.takeTerminal()
		if c.copy != nil {
			c.copy.stop()
		}
		if c.restoreRaw != nil {
			c.restoreRaw()
		}
		if c.winch != nil {
			signal.Stop(c.winch)
			close(c.winch)
			<-c.winchEnd
		}
		if c.master != nil {
			c.input.shutdown(false)
			t := time.NewTimer(drain)
			select {
			case <-c.pumpDone:
			case <-t.C:
			}
			t.Stop()
			_ = c.master.Close() // wakes a pump or a feeder still blocked on it
			<-c.pumpDone
		} else if c.input != nil {
			c.input.shutdown(true)
		}
		if c.input != nil {
			<-c.input.done
		}
	})
}

// wait reaps the child; under pipes it also waits, for at most drainDelay,
// for the output still in flight.
func (c *child) wait() (*os.ProcessState, error) {
	c.waited = true
	err := c.cmd.Wait()
	return c.cmd.ProcessState, err
}

// abort is the deferred safety net: if supervision ended early (a panic),
// the group is killed and reaped and the terminal restored.
func (c *child) abort() {
	if c.waited {
		return
	}
	_ = c.signal(syscall.SIGKILL)
	c.release(0)
	_, _ = c.wait()
}

// waitExit blocks until the child has exited without reaping it, so that
// its pid, and with it the process group id, stays reserved until guard has
// made sure the group is gone.
func waitExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}
