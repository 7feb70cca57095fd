package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// child is one started tool with everything guard set up around it. Its
// pid is also its process group id, and its session id when it leads a
// session of its own (see session.go): setsid under a pty and when none of
// its standard files is a terminal; with a terminal it gets a process
// group of its own in guard's session.
//
// It is started with syscall.ForkExec rather than os/exec: os/exec probes
// for pidfd support, starts a goroutine per context and per stream and
// always makes pipes for writers that are not files; guard needs none of
// that, and a tool whose output nothing reads gets guard's own descriptors.
type child struct {
	pid   int
	enter string  // what Enter sends on the child's stdin
	input *feeder // the child's stdin as guard writes it; nil when guard does not
	copy  *copier // guard's stdin into input
	// stdin is the file the child reads as its stdin (guard's own, the
	// answer pipe, the pty or /dev/null), for the kernel's word on whether
	// the tool waits for input; zero when prompts are not watched.
	stdin fileID

	ttyFD int // terminal handed to the child as its foreground; -1 when none
	raw   *rawTerminal

	master   *os.File   // pty master; nil when piped
	readers  []*os.File // guard's ends of the output pipes, or the master
	readDone chan struct{}
	winch    chan os.Signal
	winchEnd chan struct{}

	life    *lifeline // ends the group if guard dies first; nil when it could not start
	session bool      // the child leads a session of its own

	mu          sync.Mutex // guards reaped against a late signal from a timer
	reaped      bool
	releaseOnce sync.Once
}

// startChild starts the tool described by s, its output going through w.
func startChild(s Spec, w *watcher) (*child, error) {
	c := &child{enter: "\n", ttyFD: -1, readDone: make(chan struct{}, 3)}
	c.life = startLifeline() // before the tool: see lifeline
	var err error
	if s.PTY {
		err = c.startPTY(s, w)
	} else {
		err = c.startPiped(s, w)
	}
	if err != nil {
		c.life.dismiss()
		return nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	return c, nil
}

// childFiles collects the three descriptors a child starts with and the
// ones guard must close once it has started (its copies of pipe ends,
// /dev/null).
type childFiles struct {
	std   [3]*os.File
	close []*os.File
}

func (f *childFiles) closeAll() {
	for _, x := range f.close {
		_ = x.Close()
	}
	f.close = nil
}

// devNull returns /dev/null for a stream the child gets nothing on.
func (f *childFiles) devNull() (*os.File, error) {
	for _, x := range f.close {
		if x.Name() == os.DevNull {
			return x, nil
		}
	}
	n, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	f.close = append(f.close, n)
	return n, nil
}

// output sets the child's descriptor for one output stream: guard's own
// file when nothing needs to read the stream (the tool writes straight to
// it, at no cost to guard), /dev/null for none, else a pipe guard reads.
func (c *child) output(f *childFiles, i int, dst io.Writer, read bool, snk sink) error {
	if !read {
		file, isFile := dst.(*os.File)
		switch {
		case isFile && file != nil:
			f.std[i] = file
			return nil
		case dst == nil || isFile:
			n, err := f.devNull()
			f.std[i] = n
			return err
		}
	}
	r, wr, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("output pipe: %w", err)
	}
	f.std[i] = wr
	f.close = append(f.close, wr)
	c.startReader(r, snk)
	return nil
}

func (c *child) startPiped(s Spec, w *watcher) error {
	var f childFiles
	defer f.closeAll()
	attr := &syscall.SysProcAttr{Setpgid: true}
	switch {
	case s.Prompts == PromptsAnswer || s.Prompts == PromptsYes:
		// Answers need a stdin guard can write to.
		r, wr, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("stdin pipe: %w", err)
		}
		f.std[0] = r
		f.close = append(f.close, r)
		c.input = newFeeder(wr, true)
	case s.Stdin != nil:
		f.std[0] = s.Stdin
	default:
		n, err := f.devNull()
		if err != nil {
			return err
		}
		f.std[0] = n
	}
	watched := s.watched()
	err := c.output(&f, 1, s.Stdout, watched || s.Capture, sink{w: w, st: outStream, dst: s.Stdout})
	if err == nil {
		err = c.output(&f, 2, s.Stderr, watched, sink{w: w, st: errStream, dst: s.Stderr})
	}
	if err != nil {
		c.abortStart()
		return err
	}
	if s.Prompts != PromptsOff {
		c.stdin = idOf(f.std[0]) // /dev/null too: nothing ever blocks reading it
	}
	// A background group reading the terminal is stopped by SIGTTIN, and
	// keys (^C, ^Z) go to the foreground group: the child gets the terminal
	// while it runs when it was handed guard's own.
	for _, file := range f.std {
		if file == s.Stdin || file == s.Stdout || file == s.Stderr {
			if fd, ok := foregroundTTY(file); ok {
				attr.Foreground, attr.Ctty = true, fd
				c.ttyFD = fd
				break
			}
		}
	}
	if !anyTerminal(f.std) {
		// No terminal ties it to guard's session: a session of its own,
		// which every job of a job-control shell stays in (see
		// session.go). A terminal, even one guard is in the background
		// of, keeps it in guard's session, where job control stops a
		// background reader of the terminal (SIGTTIN).
		attr.Setpgid, attr.Setsid = false, true
		c.session = true
	}
	if err := c.fork(s, f.std, attr); err != nil {
		// The child may have taken the terminal before its exec failed.
		c.takeTerminal()
		c.abortStart()
		return err
	}
	f.closeAll() // the child's ends: guard's copies must go for EOF to come
	if c.input != nil {
		c.startInput(s.Stdin)
	}
	return nil
}

func (c *child) startPTY(s Spec, w *watcher) error {
	master, slave, err := openPTY()
	if err != nil {
		return err
	}
	var outFile, errFile *os.File
	if f, ok := s.Stdout.(*os.File); ok {
		outFile = f
	}
	if f, ok := s.Stderr.(*os.File); ok {
		errFile = f
	}
	sizeFrom := terminalWithSize(outFile, s.Stdin, errFile)
	if sizeFrom != nil {
		copySize(sizeFrom, master)
	}
	if s.Prompts != PromptsOff {
		c.stdin = idOf(slave)
	}
	// A session of its own with the pty as its controlling terminal: that
	// is its own process group too.
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	c.session = true
	err = c.fork(s, [3]*os.File{slave, slave, slave}, attr)
	slave.Close()
	if err != nil {
		master.Close()
		return err
	}
	c.master = master
	c.enter = "\r"
	c.input = newFeeder(master, false)
	c.startReader(master, sink{w: w, st: outStream, dst: s.Stdout})

	if s.Stdin != nil && mayRead(s.Stdin) {
		if fd, ok := fdOf(s.Stdin); ok && term.IsTerminal(fd) {
			// Keys go to the child's terminal as typed; its line
			// discipline, not guard's, turns ^C into SIGINT.
			c.raw = makeRaw(fd)
		}
		c.startInput(s.Stdin)
	}
	if sizeFrom != nil {
		c.followSize(sizeFrom)
	}
	return nil
}

// anyTerminal reports whether any of a child's standard files is a
// terminal.
func anyTerminal(files [3]*os.File) bool {
	for _, f := range files {
		if fd, ok := fdOf(f); ok && term.IsTerminal(fd) {
			return true
		}
	}
	return false
}

// fork starts the process with files as its 0, 1 and 2.
func (c *child) fork(s Spec, files [3]*os.File, attr *syscall.SysProcAttr) error {
	env := s.Env
	if env == nil {
		env = os.Environ()
	}
	fds := make([]uintptr, len(files))
	for i, f := range files {
		// Fd puts the file in blocking mode, which is what a child
		// expects of its standard descriptors (os/exec does the same).
		fds[i] = f.Fd()
	}
	// Pdeathsig covers the instant between the fork and the lifeline's
	// arm: a guard killed there takes the tool's first process with it
	// (the lifeline covers the rest of the group from arm on). It belongs
	// to the thread that forks, so the fork runs on a locked thread, which
	// goes back to the pool afterwards and lives as long as guard does.
	attr.Pdeathsig = syscall.SIGKILL
	runtime.LockOSThread()
	pid, err := syscall.ForkExec(s.Path, s.Argv, &syscall.ProcAttr{Dir: s.Dir, Env: env, Files: fds, Sys: attr})
	if err == nil {
		c.life.arm(pid, c.session) // at once: see lifeline
	}
	runtime.UnlockOSThread()
	runtime.KeepAlive(files)
	if err != nil {
		return &os.PathError{Op: "fork/exec", Path: s.Path, Err: err}
	}
	c.pid = pid
	return nil
}

// abortStart undoes what was set up for a child that did not start.
func (c *child) abortStart() {
	if c.input != nil {
		c.input.shutdown(true)
	}
	for _, r := range c.readers {
		_ = r.Close()
	}
	for range c.readers {
		<-c.readDone
	}
}

// startInput copies guard's stdin to the child; with no stdin, or one guard
// cannot read (a terminal guard is in the background of), the child's input
// ends at once.
func (c *child) startInput(stdin *os.File) {
	if stdin != nil && mayRead(stdin) {
		var suspendAt func([]byte) int
		if c.raw != nil {
			suspendAt = c.suspendKey
		}
		if cp, err := startCopier(stdin, c.input, suspendAt); err == nil {
			c.copy = cp
			return
		}
	}
	c.input.end(nil)
}

// suspendKey finds the suspend key (Ctrl-Z) in keys typed for a pty child.
// The pty's own line discipline cannot stop the child with it: the child
// leads its own session, so its process group has no parent in that
// session ("orphaned"), and the kernel drops a terminal stop signal to
// such a group. guard stops the group itself instead (see suspend).
func (c *child) suspendKey(typed []byte) int {
	fd, ok := fdOf(c.master)
	if !ok {
		return -1
	}
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS) // the child's side's settings
	if err != nil || t.Lflag&unix.ISIG == 0 || t.Cc[unix.VSUSP] == 0 {
		return -1
	}
	return bytes.IndexByte(typed, t.Cc[unix.VSUSP])
}

// suspended tells of the suspend key typed for a pty child; nil when guard
// does not copy keys from a terminal.
func (c *child) suspended() <-chan struct{} {
	if c.copy == nil || c.copy.suspendAt == nil {
		return nil
	}
	return c.copy.suspended
}

// startReader copies r (a pipe's read end, or the pty master) to dst until
// the child side is closed: end of file, or EIO on a pty master once no
// process holds the terminal.
func (c *child) startReader(r *os.File, dst sink) {
	c.readers = append(c.readers, r)
	go func() {
		defer func() { c.readDone <- struct{}{} }()
		buf := make([]byte, 32*1024)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					if r == c.master {
						// A terminal never blocks its writer: keep
						// observing, drop what cannot be shown.
						dst.dst = nil
					} else {
						// The reader of guard's output is gone: so is
						// the child's, which then sees a broken pipe as
						// it would without guard.
						_ = r.Close()
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
}

// followSize keeps the child's terminal the size of guard's.
func (c *child) followSize(from *os.File) {
	c.winch = make(chan os.Signal, 1)
	c.winchEnd = make(chan struct{})
	signal.Notify(c.winch, syscall.SIGWINCH)
	go func() {
		defer close(c.winchEnd)
		for range c.winch {
			copySize(from, c.master)
		}
	}()
}

// signal sends sig to everything of the child's: every process group of
// its session when it leads one (see session.go), else its process group.
// A group that is already gone is not an error, and once the child is
// reaped its ids may belong to someone else: nothing is sent then.
func (c *child) signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid <= 0 || c.reaped {
		return nil
	}
	if c.session {
		return signalSession(c.pid, c.pid, sig)
	}
	return c.signalGroupLocked(sig)
}

// signalGroup sends sig to the child's first process group only: the
// group a terminal's ^Z would stop and fg continue.
func (c *child) signalGroup(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid <= 0 || c.reaped {
		return nil
	}
	return c.signalGroupLocked(sig)
}

func (c *child) signalGroupLocked(sig syscall.Signal) error {
	err := unix.Kill(-c.pid, sig)
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
	if c.ttyFD >= 0 {
		_ = setForeground(c.ttyFD, unix.Getpgrp())
	}
}

// atTerminal reports whether a person's terminal is in play: the child
// holds guard's terminal, or guard's terminal is in raw mode for the
// child's pty.
func (c *child) atTerminal() bool { return c.ttyFD >= 0 || c.raw != nil }

// giveTerminal hands the terminal to the child again after guard was
// continued, if guard has it (the shell's fg; after bg it has not).
func (c *child) giveTerminal() {
	if c.ttyFD >= 0 && inForeground(c.ttyFD) {
		_ = setForeground(c.ttyFD, c.pid)
	}
	if c.raw != nil && inForeground(c.raw.fd) {
		c.raw.again()
	}
}

// release undoes everything set up around the child once it has exited:
// terminal ownership and mode, stdin copying, size following, and drains
// the output for at most drain before closing guard's ends of it.
func (c *child) release(drain time.Duration) {
	c.releaseOnce.Do(func() {
		c.takeTerminal()
		if c.copy != nil {
			c.copy.stop()
		}
		if c.winch != nil {
			signal.Stop(c.winch)
			close(c.winch)
			<-c.winchEnd
		}
		if c.master != nil {
			c.input.shutdown(false)
		}
		t := time.NewTimer(drain)
		left := len(c.readers)
	drained:
		for left > 0 {
			select {
			case <-c.readDone:
				left--
			case <-t.C:
				break drained
			}
		}
		t.Stop()
		// Closing wakes a reader (or a feeder, on the master) still
		// blocked: a process that left the group may hold the pipe or
		// the terminal open forever.
		for _, r := range c.readers {
			_ = r.Close()
		}
		for ; left > 0; left-- {
			<-c.readDone
		}
		// Only now: the last of a pty child's output is written to guard's
		// terminal as the child wrote it, not translated once more.
		c.raw.restore()
		if c.input != nil {
			if c.master == nil {
				c.input.shutdown(true)
			}
			<-c.input.done
		}
	})
}

// wait reaps the child, dismissing its lifeline first: whatever guard
// meant to do to the group is done, and until the reap the group id is
// still the child's.
func (c *child) wait() (unix.WaitStatus, error) {
	c.life.dismiss()
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(c.pid, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		c.mu.Lock()
		c.reaped = true
		c.mu.Unlock()
		return ws, err
	}
}

// abort is the deferred safety net: if supervision ended early (a panic),
// the group is killed and reaped and the terminal restored.
func (c *child) abort() {
	c.mu.Lock()
	reaped := c.reaped
	c.mu.Unlock()
	if reaped {
		return
	}
	_ = c.signal(syscall.SIGKILL)
	c.release(0)
	_, _ = c.wait()
}

// fileID names an open file by device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(f *os.File) fileID {
	fd, ok := fdOf(f)
	if !ok {
		return fileID{}
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return fileID{}
	}
	return fileID{uint64(st.Dev), st.Ino}
}
