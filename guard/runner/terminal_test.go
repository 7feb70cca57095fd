package runner

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// runOnTerminal runs a helper guard (mode) in a new session whose
// controlling terminal is a fresh pty, types input into it, and returns the
// helper's exit code and everything shown on the terminal.
func runOnTerminal(t *testing.T, mode, script, input string) (int, string) {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	cmd := exec.Command(os.Args[0], script)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	err = cmd.Start()
	tty.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killGroupMembers(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var shown bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&shown, master) // ends with EIO when the session is gone
		close(copied)
	}()
	if _, err := master.WriteString(input); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("helper on a terminal did not finish")
	}
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	return cmd.ProcessState.ExitCode(), shown.String()
}

// On a terminal the child must be the foreground group, or reading the
// terminal stops it with SIGTTIN; afterwards guard takes the terminal back.
func TestTerminalForeground(t *testing.T) {
	script := writeScript(t, `read x; echo "got $x"; exit 5`)
	code, shown := runOnTerminal(t, "fg", script, "hello\n")
	if code != 5 || !strings.Contains(shown, "got hello") {
		t.Fatalf("exit %d, terminal showed %q", code, shown)
	}
}

// Under a pty with guard's stdin a terminal, keys are copied through raw,
// and guard's terminal mode is restored afterwards.
func TestPTYWithTerminalStdin(t *testing.T) {
	script := writeScript(t, `read x; echo "got $x"; exit 6`)
	code, shown := runOnTerminal(t, "ptyin", script, "hello\r")
	if code != 6 || !strings.Contains(shown, "got hello") {
		t.Fatalf("exit %d, terminal showed %q", code, shown)
	}
}
