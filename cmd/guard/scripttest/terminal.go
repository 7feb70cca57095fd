package scripttest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// helperPrograms are the test binary's other names: programs the scripts
// run (as exec heldin ..., exec ttyrun ...) that are neither guard nor a
// tool guard shims. Each runs CMD the way a caller of guard would and
// exits with CMD's status (128+N when a signal N ended it).
var helperPrograms = map[string]func() int{
	"heldin": heldIn,
	"ttyrun": ttyRun,
}

// helperLimit ends a helper's command that has not ended by itself: a test
// of a hang must fail, not hang.
const helperLimit = 60 * time.Second

// heldIn runs CMD ARGS... as an agent's harness does: its stdin is an open
// pipe that nobody writes to and that is closed only after CMD has exited,
// so a tool that reads its stdin waits for good.
func heldIn() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: heldin CMD [ARGS...]")
		return 2
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "heldin:", err)
		return 2
	}
	defer w.Close()
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, os.Stdout, os.Stderr
	err = cmd.Start()
	r.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "heldin:", err)
		return 127
	}
	return waitLimited(cmd, "heldin")
}

// ttyRun runs CMD ARGS... on a new terminal of 40 rows and 100 columns,
// its controlling terminal, with stdin, stdout and stderr on it, as a
// person at a terminal would, and prints what the terminal showed (with
// the terminal's \r\n made \n again).
func ttyRun() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ttyrun CMD [ARGS...]")
		return 2
	}
	master, tty, err := pty.Open()
	if err == nil {
		err = pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: 100})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttyrun:", err)
		return 2
	}
	defer master.Close()
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = cmd.Start()
	tty.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttyrun:", err)
		return 127
	}
	var shown bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&shown, master) // ends with EIO once the terminal is closed
		close(copied)
	}()
	status := waitLimited(cmd, "ttyrun")
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	os.Stdout.Write(bytes.ReplaceAll(shown.Bytes(), []byte("\r\n"), []byte("\n")))
	return status
}

// waitLimited waits for cmd for at most helperLimit and returns its
// status as a shell reports it.
func waitLimited(cmd *exec.Cmd, name string) int {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(helperLimit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Process.Kill()
		<-done
		fmt.Fprintf(os.Stderr, "%s: %s did not end within %s\n", name, cmd.Path, helperLimit)
		return 99
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 127
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
