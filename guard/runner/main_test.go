package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a small guard: see runHelper.
const helperEnv = "RUNNER_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[len(os.Args)-1], os.Args[1:len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// runHelper is the re-executed test binary: "run" supervises the script
// (with args) and exits with the result's status, as a shim would; "exec"
// execs it.
func runHelper(mode, script string, args []string) int {
	switch mode {
	case "run":
		r := Run(context.Background(), Spec{
			Path: script, Argv: append([]string{script}, args...), Stdout: os.Stdout, Stderr: os.Stderr,
			Budget: time.Minute, Grace: 5 * time.Second,
		})
		return r.Status()
	case "fg", "ptyin":
		// stdin is this helper's controlling terminal (see terminal_test.go).
		before, err := unix.IoctlGetTermios(0, unix.TCGETS)
		if err != nil {
			return 90
		}
		r := Run(context.Background(), Spec{
			Path: script, Argv: []string{script}, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
			Budget: 20 * time.Second, PTY: mode == "ptyin",
		})
		if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err != nil || pgrp != unix.Getpgrp() {
			return 91 // the terminal was not taken back
		}
		after, err := unix.IoctlGetTermios(0, unix.TCGETS)
		if err != nil || *after != *before {
			return 92 // the terminal mode was not restored
		}
		return r.Status()
	case "pty":
		// stdout is this helper's terminal (see terminal_test.go); the child
		// gets a pty of its own.
		r := Run(context.Background(), Spec{
			Path: script, Argv: []string{script}, Stdout: os.Stdout, Stderr: os.Stderr,
			Budget: 20 * time.Second, PTY: true,
		})
		return r.Status()
	case "inspect":
		// Whether process PID waits for input on file DEV:INO, the last
		// argument being "PID:DEV:INO".
		var pid int
		var in fileID
		if _, err := fmt.Sscanf(script, "%d:%d:%d", &pid, &in.dev, &in.ino); err != nil {
			return 97
		}
		waiting, known := waitsForInput(pid, in)
		fmt.Printf("waiting %v known %v\n", waiting, known)
		return 0
	case "wait-read", "wait-poll", "wait-select", "wait-epoll", "wait-other", "wait-busy":
		return waitHelper(mode, script)
	case "exec":
		err := Exec(script, []string{script, "from-exec"}, nil)
		fmt.Fprintf(os.Stderr, "helper: %v\n", err)
		return StartStatus(err)
	}
	return 99
}

// writeScript writes a /bin/sh script into a fresh temporary folder.
func writeScript(t testing.TB, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs s and makes sure nothing of the child's group outlives the test.
func run(t testing.TB, ctx context.Context, s Spec) Result {
	t.Helper()
	if s.Grace == 0 {
		s.Grace = 200 * time.Millisecond
	}
	r := Run(ctx, s)
	if r.Pid > 0 {
		t.Cleanup(func() { killGroupMembers(r.Pid) })
	}
	return r
}

// groupMembers lists the live (not zombie) processes in process group pgid,
// read from /proc, so that tests never signal a group id that may have been
// reused.
func groupMembers(pgid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp ...
		if len(f) < 3 || f[0] == "Z" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		pids = append(pids, pid)
	}
	return pids
}

func killGroupMembers(pgid int) {
	for _, pid := range groupMembers(pgid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// requireGroupGone fails unless the group empties within a generous bound
// (a SIGKILLed process takes a moment to go).
func requireGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := groupMembers(pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d still has processes %v", pgid, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFile waits for path to exist and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			return string(b)
		}
		if !errors.Is(err, os.ErrNotExist) && err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// captured is the run's captured stdout as a string.
func captured(r Result) string {
	b, ok := r.Stdout.Bytes()
	if !ok {
		return "<larger than CaptureMemory>"
	}
	return string(b)
}
