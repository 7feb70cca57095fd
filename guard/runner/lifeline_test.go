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
