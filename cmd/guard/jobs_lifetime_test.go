package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// A tool that turns on job control (`set -m`, as bash wrappers do) puts
// each background job in a process group of its own. Those jobs are the
// tool's as much as its first group is: a timeout (124) and a SIGKILL of
// guard end them too (docs/process-lifetime.md). The jobs are found by a
// marker in their environment; each one must be in a group other than the
// tool's, or the case would prove nothing.
func TestJobControlChildrenEnd(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash: the job-control tool is a bash script")
	}
	e := newFaultEnv(t, `
[tools.jobs]
timeout = "60s"

[tools.jobsshort]
timeout = "5s"
`)
	script := "#!" + bash + `
set -m
sleep 1000 &
echo $! > "$DIR/$MARK.job1.tmp" && mv "$DIR/$MARK.job1.tmp" "$DIR/$MARK.job1"
sleep 1000 &
echo $! > "$DIR/$MARK.job2.tmp" && mv "$DIR/$MARK.job2.tmp" "$DIR/$MARK.job2"
echo $$ > "$DIR/$MARK.pid"
echo started
sleep 1000
`
	if err := os.MkdirAll(e.Bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"jobs", "jobsshort"} {
		if err := os.WriteFile(filepath.Join(e.Bin, name), []byte(e.expand(script)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.LinkShims()

	// start calls tool with a marker of its own and waits until it has
	// started both jobs, each in a group apart from the tool's.
	start := func(t *testing.T, tool, id string) (mark string, cmd *exec.Cmd, done chan struct{}) {
		mark = fmt.Sprintf("MARK=jobs-%d-%s", os.Getpid(), id)
		t.Cleanup(func() {
			for _, p := range guardtest.EnvProcs(mark) {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		})
		cmd = e.With(mark).Command(tool)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done = make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		base := filepath.Join(e.Dir, strings.TrimPrefix(mark, "MARK="))
		tool1 := waitPIDFile(t, base+".pid", 10*time.Second)
		for _, job := range []string{".job1", ".job2"} {
			pid := waitPIDFile(t, base+job, 10*time.Second)
			// By its stat, not its environment: a job caught in its exec
			// has none to read for an instant.
			p, ok := guardtest.ReadProcStat(pid)
			if !ok || p.State == 'Z' || p.State == 'X' {
				t.Fatalf("job %d of the tool is not running", pid)
			}
			if p.PGID == tool1 {
				t.Fatalf("job %d is in the tool's own group %d: set -m did not take effect, the case proves nothing", pid, tool1)
			}
		}
		return mark, cmd, done
	}

	t.Run("guard-killed", func(t *testing.T) {
		mark, cmd, done := start(t, "jobs", "killed")
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.EnvProcs(mark) }, 10*time.Second); len(left) > 0 {
			t.Fatalf("guard was SIGKILLed, and the tool's job-control jobs live on: %s", guardtest.DescribeProcs(left))
		}
		if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return lifelines(cmd.Process.Pid) }, 10*time.Second); len(left) > 0 {
			t.Errorf("the lifeline outlived its job: %s", guardtest.DescribeProcs(left))
		}
	})

	t.Run("timeout", func(t *testing.T) {
		mark, cmd, done := start(t, "jobsshort", "timeout")
		<-done
		if code := statusOf(cmd.ProcessState); code != 124 {
			t.Fatalf("the call ended with %d, want 124 (its timeout)", code)
		}
		// guard has exited: whatever of the tool is left now was left by it.
		if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.EnvProcs(mark) }, 10*time.Second); len(left) > 0 {
			t.Fatalf("the call timed out (124), and the tool's job-control jobs live on: %s", guardtest.DescribeProcs(left))
		}
	})
}
