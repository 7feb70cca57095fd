package scripttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The suite-wide orphan check must see a process that escaped its script:
// a grandchild whose parent exited, adopted by init.
func TestScriptProcsSeesOrphans(t *testing.T) {
	work := t.TempDir()
	script := filepath.Join(work, "detach")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 30 >/dev/null 2>&1 &\necho $!\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script)
	cmd.Env = append(os.Environ(), "WORK="+work)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	defer syscall.Kill(pid, syscall.SIGKILL)
	got := scriptProcs(work)
	if len(got) != 1 || got[0].PID != pid {
		t.Fatalf("scriptProcs = %v, want the orphaned sleep %d", got, pid)
	}
}
