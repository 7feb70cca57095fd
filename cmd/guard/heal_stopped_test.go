package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// A detached heal stopped with SIGSTOP keeps its lock, and its own limit,
// timed inside the stopped process, never fires. A waiter with no budget
// (`guard heal --wait`, a call without one) used to wait for it forever;
// it now sees the heal's record not updated for longer than the heal's own
// limit (3 s here, and the 10 s a waiter allows past it), says that the
// heal is stopped and how to continue or end it, and exits 75. `guard
// status` shows the heal stopped. The build's step stops the heal itself
// (its parent) as its first act, so the stop lands before the heal's limit
// whatever the machine's load.
func TestStoppedHealIsNotWaitedForForever(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, `
[builds.demo]
dir = "$DIR/src"
steps = [["./make"]]
timeout = "3s"

[tools.tool]
path = "$DIR/src/out/tool"
build = "demo"
`)
	if err := os.MkdirAll(filepath.Join(e.Dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.Tool(filepath.Join(e.Dir, "src", "make"), `echo $PPID > "$DIR/heal.pid.tmp" && mv "$DIR/heal.pid.tmp" "$DIR/heal.pid"
kill -STOP $PPID
exec sleep 1000
`)

	// The call starts the heal detached and, its budget spent, exits 75.
	if r := e.With("GUARD_TIMEOUT=2s").Run("tool", "hi"); r.Code != 75 {
		t.Fatalf("the first call: %s", r)
	}
	pid := waitPIDFile(t, filepath.Join(e.Dir, "heal.pid"), 30*time.Second)
	t.Cleanup(func() { guardtest.KillSession(pid) }) // the heal leads a session of its own, its step in it
	deadline := time.Now().Add(30 * time.Second)
	for procState(pid) != 'T' {
		if time.Now().After(deadline) {
			t.Fatalf("the heal (pid %d) never stopped; state %q", pid, procState(pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var rec struct {
		PID     int   `json:"pid"`
		LimitMS int64 `json:"limit_ms"`
	}
	b, err := os.ReadFile(filepath.Join(e.StateDir, "jobs", "build-demo.json"))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.PID != pid || rec.LimitMS != 3000 {
		t.Fatalf("the job's record is not the stopped heal's, with its limit of 3s (%v): %s", err, b)
	}
	p := strconv.Itoa(pid)

	// Status says it is stopped at once, and how to continue it.
	r := e.RunPath(e.Guard, "status")
	if !strings.Contains(r.Stdout, "stopped (SIGSTOP): kill -CONT "+p+" continues it") {
		t.Errorf("guard status does not show the heal stopped:\n%s", r)
	}
	r = e.RunPath(e.Guard, "status", "--json")
	var report struct {
		Healing []struct {
			PID   int    `json:"pid"`
			State string `json:"state"`
		} `json:"healing"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &report); err != nil || len(report.Healing) != 1 ||
		report.Healing[0].PID != pid || report.Healing[0].State != "stopped" {
		t.Errorf("guard status --json does not show the heal stopped (%v):\n%s", err, r)
	}

	// guard heal --wait, no budget: it ends, and says why.
	r = e.RunPath(e.Guard, "heal", "--wait", "tool")
	if r.Code != 75 {
		t.Fatalf("guard heal --wait for a stopped heal: want 75, got %s", r)
	}
	want := "the build of demo (time left unknown) is stopped (pid " + p + " is in state T: SIGSTOP or SIGTSTP) and its record was last updated "
	if !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "longer than its own limit of 3.0s: not waiting for it; continue it: kill -CONT "+p+", or end it: kill -KILL "+p) {
		t.Errorf("guard heal --wait does not say the heal is stopped:\n%s", r)
	}

	// A call without a budget: 75 at once, with the same line.
	r = e.Run("tool", "again")
	if r.Code != 75 || !strings.Contains(r.Stderr, "guard: tool: "+want) {
		t.Errorf("a call without a budget, its heal stopped: want 75 and the line, got %s", r)
	}

	// Continued, it is no longer shown stopped.
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := e.RunPath(e.Guard, "status", "--json"); strings.Contains(r.Stdout, `"state": "stopped"`) {
		t.Errorf("guard status shows a continued heal as stopped:\n%s", r)
	}
}

// procState is the state letter of /proc/PID/stat; 0 when it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
