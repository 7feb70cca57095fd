package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitHelper is the re-executed test binary waiting in one of the ways a
// tool may wait for input (or not waiting), after creating ready.
func waitHelper(mode, ready string) int {
	fail := func(err error) int {
		os.Stderr.WriteString(mode + ": " + err.Error() + "\n")
		return 98
	}
	if err := os.WriteFile(ready, []byte("ready"), 0o644); err != nil {
		return fail(err)
	}
	buf := make([]byte, 1)
	switch mode {
	case "wait-read":
		_, err := unix.Read(0, buf)
		return errCode(err)
	case "wait-poll":
		_, err := unix.Poll([]unix.PollFd{{Fd: 3, Events: unix.POLLIN}, {Fd: 0, Events: unix.POLLIN}}, -1)
		return errCode(err)
	case "wait-select":
		var set unix.FdSet
		set.Set(0)
		_, err := unix.Select(1, &set, nil, nil, nil)
		return errCode(err)
	case "wait-epoll":
		ep, err := unix.EpollCreate1(0)
		if err == nil {
			err = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, 0, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: 0})
		}
		if err == nil {
			_, err = unix.EpollWait(ep, make([]unix.EpollEvent, 1), -1)
		}
		return errCode(err)
	case "wait-other":
		_, err := unix.Read(3, buf) // an open pipe that is not stdin
		return errCode(err)
	case "wait-busy":
		for n := 0; ; n++ {
			if n < 0 {
				return 0
			}
		}
	}
	return 99
}

func errCode(err error) int {
	if err != nil {
		return 1
	}
	return 0
}

// startWaiter starts a process that waits as mode says, its stdin an open
// pipe, and returns it once it is about to wait.
func startWaiter(t *testing.T, mode string) (*exec.Cmd, fileID) {
	t.Helper()
	in := openStdin(t, "")
	ready := filepath.Join(t.TempDir(), "ready")
	var cmd *exec.Cmd
	if mode == "child-read" {
		// A shell that runs cat and waits for it: the tool's child reads.
		cmd = exec.Command("/bin/sh", "-c", `echo ready > "$1"; cat; :`, "sh", ready)
	} else {
		cmd = exec.Command(os.Args[0], ready)
		cmd.Env = append(os.Environ(), helperEnv+"="+mode)
		other := openStdin(t, "")
		cmd.ExtraFiles = []*os.File{other}
	}
	cmd.Stdin = in
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killGroupMembers(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitFile(t, ready)
	return cmd, idOf(in)
}

// The kernel's word on a tool waiting for input: asleep in read, poll,
// select or epoll with guard's stdin among what it waits on, in the tool or
// a process it started.
func TestKernelSeesWaitForInput(t *testing.T) {
	if len(waitSyscalls) == 0 {
		t.Skip("no system call table for this machine")
	}
	for _, mode := range []string{"wait-read", "wait-poll", "wait-select", "wait-epoll", "child-read"} {
		cmd, in := startWaiter(t, mode)
		requireWaiting(t, cmd, in)
	}
}

// requireWaiting fails unless the kernel says cmd waits for input on in
// within a generous bound (it may not have reached its wait yet).
func requireWaiting(t *testing.T, cmd *exec.Cmd, in fileID) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		waiting, known := waitsForInput(cmd.Process.Pid, in)
		if waiting && known {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: waiting %v known %v", cmd.Args, waiting, known)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A tool at work, or asleep in anything but a read of its stdin, is not
// waiting for input.
func TestKernelSeesNoWaitForInput(t *testing.T) {
	if len(waitSyscalls) == 0 {
		t.Skip("no system call table for this machine")
	}
	for _, mode := range []string{"wait-other", "wait-busy"} {
		cmd, in := startWaiter(t, mode)
		time.Sleep(100 * time.Millisecond) // let it get to its wait
		for range 20 {
			waiting, known := waitsForInput(cmd.Process.Pid, in)
			if waiting || !known {
				t.Fatalf("%s: waiting %v known %v", mode, waiting, known)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// A process that is gone waits for nothing.
	if waiting, known := waitsForInput(1<<30, fileID{1, 1}); waiting || !known {
		t.Fatalf("no such process: waiting %v known %v", waiting, known)
	}
}

// A process guard may not inspect (another user's: a setuid sudo asking
// for a password) might be the one waiting: the kernel's word is unknown,
// and the caller falls back to the text.
func TestKernelCannotSayForAnotherUsersProcess(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and setpriv to play the unprivileged user")
	}
	cmd, in := startWaiter(t, "wait-read") // root's
	requireWaiting(t, cmd, in)             // as root, guard sees it wait
	// The test binary, where the unprivileged user may run it.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(dir, "runner.test")
	data, err := os.ReadFile(os.Args[0])
	if err == nil {
		err = os.WriteFile(self, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	inspect := exec.Command(setpriv, "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", self, fmt.Sprintf("%d:%d:%d", cmd.Process.Pid, in.dev, in.ino))
	inspect.Env = append(os.Environ(), helperEnv+"=inspect")
	out, err := inspect.CombinedOutput()
	if err != nil || string(out) != "waiting false known false\n" {
		t.Fatalf("as nobody: %q (%v)", out, err)
	}

}

// BenchmarkWaitsForInput is the cost of one look at a quiet tool: a shell
// waiting for the cat it started, which reads its stdin.
func BenchmarkWaitsForInput(b *testing.B) {
	in, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	defer w.Close()
	cmd := exec.Command("/bin/sh", "-c", "cat; :")
	cmd.Stdin = in
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	id := idOf(in)
	for waiting, _ := waitsForInput(cmd.Process.Pid, id); !waiting; waiting, _ = waitsForInput(cmd.Process.Pid, id) {
		time.Sleep(time.Millisecond)
	}
	for b.Loop() {
		if waiting, _ := waitsForInput(cmd.Process.Pid, id); !waiting {
			b.Fatal("not waiting")
		}
	}
}

func TestParseProcFiles(t *testing.T) {
	if st := stateOf([]byte("42 (a (b) c) S 1 42 42 0")); st != 'S' {
		t.Errorf("stateOf = %q", st)
	}
	if st := stateOf([]byte("42 (x)")); st != 0 {
		t.Errorf("stateOf of a cut line = %q", st)
	}
	if len(waitSyscalls) == 0 {
		return
	}
	var read int
	for _, w := range waitSyscalls {
		if w.kind == waitRead && (read == 0 || w.nr < read) {
			read = w.nr // read itself has the lowest number of its kind
		}
	}
	line := fmt.Sprintf("%d 0x0 0x7ffd1000 0x1 0x0 0x0 0x0 0x7ffd0ff8 0x7f00deadbeef\n", read)
	if nr, args := parseSyscall([]byte(line)); nr != read || args[1] != 0x7ffd1000 || args[2] != 1 {
		t.Errorf("parseSyscall(%q) = %d %x", line, nr, args)
	}
	for _, line := range []string{"running\n", "-1 0x7ffd0ff8 0x7f00deadbeef\n", "230 0x0 0x0 0x1 0x2 0x0 0x0 0x1 0x2\n", "0 zz 0 0 0 0 0 0 0\n", ""} {
		if nr, _ := parseSyscall([]byte(line)); nr != -1 {
			t.Errorf("parseSyscall(%q) = %d, want -1", line, nr)
		}
	}
}

func FuzzParseProcFiles(f *testing.F) {
	f.Add([]byte("0 0x0 0x7ffd 0x1 0x0 0x0 0x0 0x7ffd 0x7f00\n"))
	f.Add([]byte("42 (a) b) R 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseSyscall(b) // must not panic on any input
		stateOf(b)
	})
}
