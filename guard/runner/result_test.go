package runner

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want int
	}{
		{Result{Outcome: Exited}, 0},
		{Result{Outcome: Exited, Code: 42}, 42},
		{Result{Outcome: Signaled, Signal: syscall.SIGKILL}, 137},
		{Result{Outcome: Interrupted, Signal: syscall.SIGTERM}, 143},
		{Result{Outcome: Interrupted, Signal: syscall.SIGINT}, 130},
		{Result{Outcome: Interrupted, Signal: syscall.SIGTERM, Own: true, Code: 7}, 7},
		{Result{Outcome: Interrupted, Signal: syscall.SIGTERM, Own: true}, 0},
		{Result{Outcome: TimedOut}, 124},
		{Result{Outcome: Stalled}, 124},
		{Result{Outcome: PromptKilled}, 124},
		{Result{Outcome: StartFailed, Err: fmt.Errorf("start x: %w", syscall.ENOENT)}, 127},
		{Result{Outcome: StartFailed, Err: syscall.EACCES}, 126},
		{Result{Outcome: Outcome(99)}, 125},
	} {
		if got := tc.r.Status(); got != tc.want {
			t.Errorf("%v: Status() = %d, want %d", tc.r.Outcome, got, tc.want)
		}
	}
}

func TestStartStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{syscall.ENOENT, 127},
		{exec.ErrNotFound, 127},
		{fmt.Errorf("exec x: %w", syscall.EACCES), 126},
		{syscall.ENOEXEC, 126},
		{syscall.EISDIR, 126},
		{errors.New("odd"), 126},
	} {
		if got := StartStatus(tc.err); got != tc.want {
			t.Errorf("StartStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	want := map[Outcome]string{
		Exited: "exited", Signaled: "signaled", TimedOut: "timeout", Stalled: "stall",
		PromptKilled: "prompt", StartFailed: "start-failed", Interrupted: "interrupted", 42: "outcome(42)",
	}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), o.String(), s)
		}
	}
}
