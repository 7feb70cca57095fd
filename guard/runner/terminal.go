package runner

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// foregroundTTY returns f's descriptor when f is a terminal whose foreground
// process group is guard's own. Only then may the child take the terminal:
// a guard running in the background must not steal it from the shell.
func foregroundTTY(f *os.File) (int, bool) {
	fd, ok := fdOf(f)
	if !ok {
		return -1, false
	}
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return -1, false
	}
	return fd, true
}

// mayRead reports whether guard can read f without being stopped: a
// terminal that is guard's controlling terminal but has another foreground
// group would stop a reader with SIGTTIN (and a mode change with SIGTTOU).
func mayRead(f *os.File) bool {
	fd, ok := fdOf(f)
	if !ok || !term.IsTerminal(fd) {
		return ok
	}
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err != nil || pgrp == unix.Getpgrp()
}

// inForeground reports whether guard's process group is the foreground of
// the terminal fd: after a stop, the shell's fg gives it back, bg does not.
func inForeground(fd int) bool {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// setForeground makes pgrp the terminal's foreground group. guard is
// usually in the background at that point, and tcsetpgrp from the
// background raises SIGTTOU, which would stop guard; blocking the signal
// on this thread makes the call succeed without one and without changing
// the signal disposition other goroutines see.
func setForeground(fd, pgrp int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	sigaddset(&set, syscall.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return err
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) //nolint:errcheck // restoring the mask cannot fail
	return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, pgrp)
}

func sigaddset(set *unix.Sigset_t, sig syscall.Signal) {
	n := uint(sig) - 1
	bits := uint(unsafe.Sizeof(set.Val[0])) * 8 // the word size differs between ports
	set.Val[n/bits] |= 1 << (n % bits)
}

// rawTerminal is guard's terminal put in raw mode while a pty child runs,
// so that keys reach the child's terminal as typed.
type rawTerminal struct {
	fd    int
	saved *term.State
}

func makeRaw(fd int) *rawTerminal {
	st, err := term.MakeRaw(fd)
	if err != nil {
		return nil
	}
	return &rawTerminal{fd: fd, saved: st}
}

// restore gives the terminal its mode back (before guard stops, and at the
// end); again puts it back in raw mode (when guard is continued).
func (r *rawTerminal) restore() {
	if r != nil {
		_ = term.Restore(r.fd, r.saved)
	}
}

func (r *rawTerminal) again() {
	if r != nil {
		_, _ = term.MakeRaw(r.fd)
	}
}

// openPTY opens a new pseudo-terminal pair. The master is non-blocking, so
// that guard's reads of it wait in the runtime's poller and closing it
// wakes them; the slave is for the child.
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	master = os.NewFile(uintptr(mfd), "/dev/ptmx")
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open pty: %w", err)
	}
	return master, os.NewFile(uintptr(sfd), name), nil
}

// terminalWithSize is the first of files that is a terminal with a window
// size, whose size the child's pty takes and follows; nil when none is.
func terminalWithSize(files ...*os.File) *os.File {
	for _, f := range files {
		fd, ok := fdOf(f)
		if !ok {
			continue
		}
		if _, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			return f
		}
	}
	return nil
}

// copySize gives the pty master the window size of the terminal from.
func copySize(from, master *os.File) {
	ffd, ok := fdOf(from)
	mfd, mok := fdOf(master)
	if !ok || !mok {
		return
	}
	if ws, err := unix.IoctlGetWinsize(ffd, unix.TIOCGWINSZ); err == nil {
		_ = unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, ws)
	}
}
