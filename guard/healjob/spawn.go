package healjob

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Low priority for a detached heal: nice 19, and the lowest best-effort IO
// class (idle would let any busy neighbour starve it, and the agent's own
// call may be waiting on it).
const (
	detachedNice     = 19
	ioprioWhoProcess = 1
	ioprioClassBE    = 2
	ioprioClassShift = 13
	detachedIOPrio   = ioprioClassBE<<ioprioClassShift | 7
)

// Spawn starts self with argv (argv[0] included) in a session of its own,
// at low CPU and IO priority, with stdin and stdout on /dev/null, stderr
// on stderr and extra as its fds 3, 4, …, and returns its pid at once. The
// child is not waited for: it outlives this process. A sandbox that
// forbids lowering the priority (seccomp) still gets the heal, and its log
// says why it runs at normal priority.
func Spawn(self string, argv, env []string, stderr *os.File, extra ...*os.File) (int, error) {
	cmd := &exec.Cmd{
		Path:        self,
		Args:        argv,
		Env:         env,
		Stderr:      stderr,
		ExtraFiles:  extra,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	type started struct {
		pid int
		err error
	}
	done := make(chan started, 1)
	// Nice and IO priority belong to a thread on Linux, and a forked child
	// inherits them from the thread that forked it: lower a thread's of its
	// own, fork from it, and let that thread end with its goroutine (a
	// goroutine that exits locked takes its thread with it), so the caller
	// goes on at its own priority.
	go func() {
		runtime.LockOSThread()
		if err := lowerPriority(); err != nil {
			fmt.Fprintf(stderr, "guard: %v; healing at normal priority\n", err)
		}
		if err := cmd.Start(); err != nil {
			done <- started{err: fmt.Errorf("start the detached heal: %w", err)}
			return
		}
		pid := cmd.Process.Pid
		_ = cmd.Process.Release()
		done <- started{pid: pid}
	}()
	s := <-done
	return s.pid, s.err
}

// lowerPriority sets the calling thread's nice value and IO priority.
func lowerPriority() error {
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, detachedNice); err != nil {
		return fmt.Errorf("lower the CPU priority: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, detachedIOPrio); e != 0 {
		return fmt.Errorf("lower the IO priority: %w", e)
	}
	return nil
}
