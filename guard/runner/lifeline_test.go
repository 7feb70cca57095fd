package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A helper guard SIGKILLed while it supervises a tool that ignores SIGHUP
// (so a pty's hangup does not end it either) and started a sleep: the
// lifeline ends the tool's whole group, piped and under a pty (a session of
// its own).
func TestLifelineEndsGroupWhenGuardIsKilled(t *testing.T) {
	for _, mode := range []string{"run", "pty"} {
		t.Run(mode, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			script := writeScript(t, `trap '' HUP
sleep 1000 &
echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"
wait`)
			cmd := exec.Command(os.Args[0], script)
			cmd.Env = append(os.Environ(), helperEnv+"="+mode, "PIDFILE="+pidFile)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := atoi(t, strings.TrimSpace(waitFile(t, pidFile)))
			t.Cleanup(func() { killGroupMembers(pgid) })
			if len(groupMembers(pgid)) < 2 {
				t.Fatalf("the tool's group %d is not the sh and its sleep: %v", pgid, groupMembers(pgid))
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			requireGroupGone(t, pgid)
		})
	}
}

// statIDs reads the group and session after the last ")" of a stat line,
// whatever the command name holds, and skips zombies.
func TestStatIDs(t *testing.T) {
	for _, c := range []struct {
		line      string
		pgrp, sid int
		ok        bool
	}{
		{"12 (sleep) S 1 12 10 0 -1", 12, 10, true},
		{"12 (a) b) S 1 7 8 0", 7, 8, true},
		{"12 (x\n) 9 9 9) R 1 30 31 0", 30, 31, true},
		{"12 (sleep) Z 1 12 10 0", 0, 0, false},
		{"12 (sleep) S 1", 0, 0, false},
		{"12 sleep S 1 2 3", 0, 0, false},
		{"12 (sleep) S 1 x 3", 0, 0, false},
	} {
		pgrp, sid, ok := statIDs([]byte(c.line))
		if pgrp != c.pgrp || sid != c.sid || ok != c.ok {
			t.Errorf("statIDs(%q) = %d, %d, %v; want %d, %d, %v", c.line, pgrp, sid, ok, c.pgrp, c.sid, c.ok)
		}
	}
}
