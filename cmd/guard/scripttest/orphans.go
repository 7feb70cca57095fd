package scripttest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// noOrphansHook makes every testscript script assert, at its end, that no
// process it started directly or through guard is still alive: after a
// timeout, a stall or a prompt kill, the child's whole group must be gone.
// Processes are recognised by the script's WORK variable in their
// environment, which every child inherits. Survivors are killed, so a
// failing script leaks nothing either.
func noOrphansHook(env *testscript.Env) error {
	work := env.WorkDir
	t := env.T()
	env.Defer(func() {
		left := guardtest.WaitProcsGone(func() []guardtest.Proc { return scriptProcs(work) }, 3*time.Second)
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		t.Fatal(fmt.Sprintf("processes of this script outlived it (orphans of a killed group?): %s", guardtest.DescribeProcs(left)))
	})
	return nil
}

// scriptProcs lists live processes whose environment carries WORK=work and
// that are not (descendants of) this test process's own children: those are
// testscript's background commands, which it stops itself.
func scriptProcs(work string) []guardtest.Proc {
	live := guardtest.LiveProcs()
	byPID := make(map[int]guardtest.Proc, len(live))
	for _, p := range live {
		byPID[p.PID] = p
	}
	self := os.Getpid()
	ours := func(p guardtest.Proc) bool {
		for range 64 {
			if p.PPID == self {
				return true
			}
			q, ok := byPID[p.PPID]
			if !ok {
				return false
			}
			p = q
		}
		return false
	}
	var out []guardtest.Proc
	for _, p := range guardtest.EnvProcs("WORK=" + work) {
		if p.PID != self && !ours(p) {
			out = append(out, p)
		}
	}
	return out
}

// groupgone PIDFILE: no live process is left in the process group led by
// the pid in PIDFILE (a supervised tool's group) within 5 s; survivors are
// killed and named.
func cmdGroupGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: groupgone PIDFILE")
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	if err != nil || pgid <= 1 {
		ts.Fatalf("bad pid file %s", args[0])
	}
	group := func() []guardtest.Proc {
		var out []guardtest.Proc
		for _, p := range guardtest.LiveProcs() {
			if p.PGID == pgid {
				out = append(out, p)
			}
		}
		return out
	}
	if left := guardtest.WaitProcsGone(group, 5*time.Second); len(left) > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		ts.Fatalf("process group %d still has %s", pgid, guardtest.DescribeProcs(left))
	}
}
