package runner

import (
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/creack/pty"
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

// takeTerminal makes guard's process group the terminal's foreground group
// again. guard is in the background at that point, and tcsetpgrp from the
// background raises SIGTTOU, which would stop guard; blocking the signal on
// this thread makes the call succeed without one and without changing the
// signal disposition other goroutines see.
func takeTerminal(fd int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	sigaddset(&set, syscall.SIGTTOU)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return err
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) //nolint:errcheck // restoring the mask cannot fail
	return unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp())
}

func sigaddset(set *unix.Sigset_t, sig syscall.Signal) {
	n := uint(sig) - 1
	bits := uint(unsafe.Sizeof(set.Val[0])) * 8 // the word size differs between ports
	set.Val[n/bits] |= 1 << (n % bits)
}

// terminalSize is the window size of the first of files that is a terminal,
// for the pty the child gets; nil when none is.
func terminalSize(files ...*os.File) (*pty.Winsize, *os.File) {
	for _, f := range files {
		fd, ok := fdOf(f)
		if !ok || !term.IsTerminal(fd) {
			continue
		}
		if ws, err := pty.GetsizeFull(f); err == nil {
			return ws, f
		}
	}
	return nil, nil
}
