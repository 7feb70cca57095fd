package runner

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// startOnTerminal starts a helper guard (mode) running script in a new
// session whose controlling terminal is a fresh pty of the given size, and
// returns it with the pty's master, which shows and types.
func startOnTerminal(t *testing.T, mode, script string, size pty.Winsize) (*exec.Cmd, *os.File) {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := pty.Setsize(master, &size); err != nil {
		t.Fatal(err)
	}
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
	return cmd, master
}

// runOnTerminal runs a helper guard (mode) on a terminal (see
// startOnTerminal), types input into it, and returns the helper's exit
// code and everything shown on the terminal.
func runOnTerminal(t *testing.T, mode, script, input string) (int, string) {
	t.Helper()
	cmd, master := startOnTerminal(t, mode, script, pty.Winsize{Rows: 24, Cols: 80})
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

// The child's pty follows the size of guard's terminal: resizing the
// person's window (SIGWINCH to guard) resizes the child's, and the child
// gets its own SIGWINCH.
func TestPTYFollowsTerminalSize(t *testing.T) {
	script := writeScript(t, `trap 'echo "size $(stty size)"; exit 4' WINCH
echo "size $(stty size)"
echo ready
while :; do sleep 0.05; done`)
	cmd, master := startOnTerminal(t, "pty", script, pty.Winsize{Rows: 24, Cols: 80})
	shown := &guardtest.Buffer{}
	go func() { _, _ = io.Copy(shown, master) }()
	waitShown(t, shown, "ready")
	if !strings.Contains(shown.String(), "size 24 80") {
		t.Fatalf("the child's terminal did not start at guard's size: %q", shown.String())
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: 30, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	waitShown(t, shown, "size 30 120")
	if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 4 {
		t.Fatalf("helper ended %v", err)
	}
}

func waitShown(t *testing.T, b *guardtest.Buffer, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q: %q", text, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With nothing to read the output for (only a budget), the tool gets
// guard's own files: a terminal stays a terminal, and a file is written by
// the tool itself, with no pipe and no copy through guard.
func TestUnwatchedRunGetsGuardsFiles(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	report := filepath.Join(t.TempDir(), "report")
	script := writeScript(t, `a=false; [ -t 0 ] && a=true
b=false; [ -t 1 ] && b=true
c=false; [ -t 2 ] && c=true
echo "stdin $a stdout $b stderr $c" > "$1"`)
	r := run(t, context.Background(), Spec{Path: script, Argv: []string{script, report}, Stdin: tty, Stdout: tty, Stderr: tty, Budget: 20 * time.Second})
	if r.Status() != 0 {
		t.Fatalf("got %v status %d err %v", r.Outcome, r.Status(), r.Err)
	}
	if got, _ := os.ReadFile(report); string(got) != "stdin true stdout true stderr true\n" {
		t.Fatalf("the tool saw %q", got)
	}

	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	r = run(t, context.Background(), Spec{Path: "/bin/readlink", Argv: []string{"readlink", "/proc/self/fd/1"}, Stdout: out, Stderr: out, Budget: 20 * time.Second})
	if got, _ := os.ReadFile(out.Name()); r.Status() != 0 || string(got) != out.Name()+"\n" {
		t.Fatalf("status %d; the tool's stdout was %q, want the file itself", r.Status(), got)
	}
}
