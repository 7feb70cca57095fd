package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// shellOnTerminal is an interactive bash, with job control, on a pty: a
// person at a terminal, typing.
type shellOnTerminal struct {
	t      *testing.T
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	shown  bytes.Buffer
	seen   int // how much of shown expect has consumed
}

func startShell(t *testing.T, env []string) *shellOnTerminal {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	_ = pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: 200})
	cmd := exec.Command(bash, "--norc", "--noprofile", "-i")
	cmd.Env = append(env, "PS1=READY$ ", "TERM=dumb")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	sh := &shellOnTerminal{t: t, master: master, cmd: cmd}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			sh.mu.Lock()
			sh.shown.Write(buf[:n])
			sh.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		guardtest.KillSession(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		master.Close()
	})
	sh.expect("READY$ ")
	return sh
}

func (sh *shellOnTerminal) typ(s string) {
	sh.t.Helper()
	if _, err := sh.master.WriteString(s); err != nil {
		sh.t.Fatal(err)
	}
}

// expect waits for text to be shown after what earlier calls consumed.
func (sh *shellOnTerminal) expect(text string) {
	sh.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sh.mu.Lock()
		all := sh.shown.String()
		sh.mu.Unlock()
		if i := strings.Index(all[sh.seen:], text); i >= 0 {
			sh.seen += i + len(text)
			return
		}
		if time.Now().After(deadline) {
			sh.t.Fatalf("the terminal never showed %q; it shows:\n%s", text, all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopAtItsRead starts tool at the shell (a tool that prints "started",
// then reads a line), stops it with Ctrl-Z once it sits in its read, and
// waits for the shell's prompt.
func (sh *shellOnTerminal) stopAtItsRead(tool string) {
	sh.t.Helper()
	sh.typ(tool + "\r")
	sh.expect("started")
	sh.waitForItsRead(tool)
	sh.typ("\x1a") // Ctrl-Z
	sh.expect("Stopped")
	sh.expect("READY$ ")
}

// waitForItsRead waits until tool, a /bin/sh script started below the
// shell, is blocked in read(2) on its stdin. guard runs as a link named
// after the tool, so the script is told from guard by its executable.
func (sh *shellOnTerminal) waitForItsRead(tool string) {
	sh.t.Helper()
	if readSyscall == "" {
		time.Sleep(200 * time.Millisecond) // no way to ask the kernel here
		return
	}
	shell, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		sh.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		below := descendants(sh.cmd.Process.Pid)
		for _, p := range below {
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
			if p.Comm == tool && exe == shell && readsStdin(p.PID) {
				return
			}
		}
		if time.Now().After(deadline) {
			sh.t.Fatalf("%s never sat in its read of stdin; below the shell: %s", tool, guardtest.DescribeProcs(below))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// descendants are the live processes below pid.
func descendants(pid int) []guardtest.Proc {
	children := map[int][]guardtest.Proc{}
	for _, p := range guardtest.LiveProcs() {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []guardtest.Proc
	for next := []int{pid}; len(next) > 0; {
		ppid := next[0]
		next = next[1:]
		for _, c := range children[ppid] {
			out = append(out, c)
			next = append(next, c.PID)
		}
	}
	return out
}

// resumeAndAnswer brings the stopped tool back with fg, answers its read
// and checks what it printed and the status the shell saw.
func (sh *shellOnTerminal) resumeAndAnswer(tool string, status int) {
	sh.t.Helper()
	sh.typ("fg\r")
	sh.expect(tool)
	sh.typ("hello\r")
	sh.expect("got hello")
	sh.expect("READY$ ")
	sh.typ("echo status=$?\r")
	sh.expect(fmt.Sprintf("status=%d", status))
}

// Ctrl-Z at a terminal: the tool stops, guard stops with it, the shell
// gets its prompt back and lists the job; fg gives the tool the terminal
// again and it goes on where it stopped. Both ways guard runs a tool at a
// terminal: with only a budget (the tool holds guard's terminal), and with
// a watchdog (the tool on a pty, guard's terminal in raw mode).
func TestCtrlZStopsWithTheShellsJob(t *testing.T) {
	for _, tool := range []string{"timed", "watched"} {
		t.Run(tool, func(t *testing.T) {
			e := newFaultEnv(t, "[tools.timed]\ntimeout = \"60s\"\n\n[tools.watched]\ntimeout = \"60s\"\nstall = \"60s\"\n")
			script := "echo started\nread line\necho \"got $line\"\nexit 3\n"
			e.Tool("timed", script)
			e.Tool("watched", script)
			sh := startShell(t, e.Env)

			sh.stopAtItsRead(tool)
			sh.typ("jobs\r")
			sh.expect("Stopped")
			sh.expect("READY$ ")
			sh.resumeAndAnswer(tool, 3)
			sh.typ("exit\r")
		})
	}
}

// The time a tool spends stopped at a person's Ctrl-Z is not time it
// worked: its budget goes on where it stopped.
func TestCtrlZPausesTheBudget(t *testing.T) {
	e := newFaultEnv(t, "[tools.timed]\ntimeout = \"2s\"\n")
	e.Tool("timed", "echo started\nread line\necho \"got $line\"\n")
	sh := startShell(t, e.Env)
	sh.stopAtItsRead("timed")
	time.Sleep(2500 * time.Millisecond) // more than the whole budget
	sh.resumeAndAnswer("timed", 0)
}

// The same for a call with a fallback: the chain's cap is a budget too, and
// the time the tool spent stopped is not taken from it (it was a wall-clock
// deadline, and the attempt ended over budget at fg with its fallback not
// even tried).
func TestCtrlZPausesTheCapOfAChain(t *testing.T) {
	e := newFaultEnv(t, "[tools.timed]\ntimeout = \"20s\"\nfallback = [\"other\"]\n[tools.other]\n[budget]\ncap = \"2s\"\n")
	// stderr streams; stdout, a chain's answer, is printed once it proved good.
	e.Tool("timed", "echo started >&2\nread line\necho \"got $line\"\n")
	e.Tool("other", "echo other ran\n")
	sh := startShell(t, e.Env)
	sh.stopAtItsRead("timed")
	time.Sleep(2500 * time.Millisecond) // more than the whole cap
	sh.resumeAndAnswer("timed", 0)
}
