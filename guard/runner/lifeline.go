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
// (close-on-exec, so neither the tool nor a build step inherits it). It is
// started before the tool, so that no instant of the tool's life is
// without it: guard writes the tool's group to it as soon as the tool has
// started (arm), and a second line once the tool has exited and its group
// was dealt with (dismiss): the shell's second read succeeds and it exits.
// When guard dies first, the kernel closes the write end, the read sees
// end of file and the shell SIGKILLs the tool's group. (Started after the
// tool, a guard killed in the millisecond the shell's fork and exec take
// left the tool running: seen once in a few hundred kills.) It leads a session of its own, so a kill of
// guard's group or session does not reach it, and holds nothing of guard's
// but the pipe: not guard's stdout, so a caller waiting for end of file
// there does not wait for it.
type lifeline struct {
	pid int
	w   *os.File
}

// lifelineShell is the lifeline's program: the first line is the tool's
// group, and its session when the tool leads one of its own; end of file
// before it means no tool started. When guard dies it kills the group,
// then every group of the session it finds in /proc/*/stat (a stat line is
// "pid (comm) S ppid pgrp session ...", the state and ids after the last
// ") "; zombies are skipped), and looks again until a look finds no group
// it has not killed (a job started meanwhile), at most 50 times: what
// signalSession does on a timeout.
const lifelineShell = `read -r g s || exit 0; read -r _ && exit 0; kill -KILL -"$g"; [ -n "$s" ] || exit 0
k=" $g "; i=0
while [ $i -lt 50 ]; do
	i=$((i+1)); n=
	for f in /proc/[0-9]*/stat; do
		read -r l <"$f" || continue
		set -- ${l##*") "}
		[ "$4" = "$s" ] && [ "$1" != Z ] && [ "$1" != X ] || continue
		case $k in *" $3 "*) continue ;; esac
		kill -KILL -"$3"; k="$k$3 "; n=1
	done
	[ -n "$n" ] || exit 0
done`

// lifelineName is the lifeline's $0, what a process list shows it as.
const lifelineName = "guard-lifeline"

// startLifeline starts a lifeline for a tool about to start; arm gives
// it the tool's group. A lifeline that cannot start (no /bin/sh, no pipe)
// leaves the run as it was before lifelines existed: nil, and arm and
// dismiss do nothing.
func startLifeline() *lifeline {
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
	// $1, unused by the script, names guard's pid for a process list.
	argv := []string{"sh", "-c", lifelineShell, lifelineName, strconv.Itoa(os.Getpid())}
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

// arm names the tool's process group, and with session its session (the
// tool leads one of its own, pgid being its id too), which the lifeline
// kills if guard dies from now on; a tool that did not start leaves it
// unarmed, and dismiss then ends it.
func (l *lifeline) arm(pgid int, session bool) {
	if l == nil || l.w == nil {
		return
	}
	line := strconv.Itoa(pgid)
	if session {
		line += " " + line
	}
	_, _ = l.w.Write([]byte(line + "\n"))
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
