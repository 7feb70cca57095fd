package runner

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A lifeline ends the tool's process group when guard dies without ending
// it itself: SIGKILLed alone, or with the process group it was started in
// (an agent's harness on a timeout). The tool runs in a group of its own
// (so a timeout can end all of it), which no signal to guard or to guard's
// group reaches; the lifeline does. See docs/process-lifetime.md for why
// it is a process and not Pdeathsig or a cgroup.
//
// It is /bin/sh reading a pipe whose only write end guard holds
// (close-on-exec, so neither the tool nor a build step inherits it). guard
// writes a line to it once the tool has exited and its group was dealt
// with: the shell's read succeeds and it exits. When guard dies first, the
// kernel closes the write end, the read sees end of file and the shell
// SIGKILLs the tool's group. It leads a session of its own, so a kill of
// guard's group or session does not reach it, and holds nothing of guard's
// but the pipe: not guard's stdout, so a caller waiting for end of file
// there does not wait for it.
type lifeline struct {
	pid int
	w   *os.File
}

// lifelineShell is the lifeline's program; $1 is the tool's group.
const lifelineShell = `read -r _ || kill -KILL -"$1"`

// lifelineName is the lifeline's $0, what a process list shows it as.
const lifelineName = "guard-lifeline"

// startLifeline starts the lifeline of the process group pgid. A lifeline
// that cannot start (no /bin/sh, no pipe) leaves the run as it was
// before lifelines existed: nil, and dismiss does nothing.
func startLifeline(pgid int) *lifeline {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	defer r.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		w.Close()
		return nil
	}
	defer null.Close()
	argv := []string{"sh", "-c", lifelineShell, lifelineName, strconv.Itoa(pgid)}
	pid, err := syscall.ForkExec("/bin/sh", argv, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{},
		Files: []uintptr{r.Fd(), null.Fd(), null.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		w.Close()
		return nil
	}
	return &lifeline{pid: pid, w: w}
}

// dismiss tells the lifeline that guard is done with the group (before the
// tool is reaped, while its pid still pins the group id) and reaps it in
// the background: it exits as soon as it reads the line.
func (l *lifeline) dismiss() {
	if l == nil || l.w == nil {
		return
	}
	_, _ = l.w.Write([]byte("\n"))
	_ = l.w.Close()
	l.w = nil
	go func(pid int) {
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
				return
			}
		}
	}(l.pid)
}
