// Command spawn runs one sample of a benchmark row for cmd/bench and
// writes what it measured to a file:
//
//	spawn REPORT PATH ARGV0 [ARG...]
//
// runs PATH with the given argv, its own stdin, stdout, stderr and
// environment, and writes "status wall_ns cpu_ns maxrss_kb minflt majflt"
// to REPORT (status: the exit status, or 128+N for signal N).
//
// It exists for the RSS figure: Linux records a vfork child's maximum RSS
// from its parent's memory when it execs, so every command started by the
// harness (a Go program with servers and buffers) would read at least the
// harness's RSS. Started from this small program instead, a row reads at
// least this program's own (about 2 MB).
package main

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 4 {
		fail("usage: spawn REPORT PATH ARGV0 [ARG...]")
	}
	report, path, argv := os.Args[1], os.Args[2], os.Args[3:]
	// The child is killed with this program (a sample past its time limit
	// is ended by killing this one), and the kernel ties that to the thread
	// that started it.
	runtime.LockOSThread()
	start := time.Now()
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fail("spawn: exec " + path + ": " + err.Error())
	}
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		_, err = syscall.Wait4(pid, &ws, 0, &ru)
		if err != syscall.EINTR {
			break
		}
	}
	wall := time.Since(start)
	if err != nil {
		fail("spawn: wait: " + err.Error())
	}
	status := ws.ExitStatus()
	if ws.Signaled() {
		status = 128 + int(ws.Signal())
	}
	line := strconv.Itoa(status) + " " +
		strconv.FormatInt(int64(wall), 10) + " " +
		strconv.FormatInt(ru.Utime.Nano()+ru.Stime.Nano(), 10) + " " +
		strconv.FormatInt(ru.Maxrss, 10) + " " +
		strconv.FormatInt(ru.Minflt, 10) + " " +
		strconv.FormatInt(ru.Majflt, 10) + "\n"
	if err := os.WriteFile(report, []byte(line), 0o644); err != nil {
		fail("spawn: " + err.Error())
	}
}

func fail(msg string) {
	os.Stderr.WriteString(msg + "\n")
	os.Exit(125)
}
