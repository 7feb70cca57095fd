package runner

import (
	"errors"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Policy says what the prompt watchdog does when the tool waits for input
// at a question.
type Policy string

const (
	// PromptsOff does not watch for prompts.
	PromptsOff Policy = ""
	// PromptsAnswer answers yes to a yes/no question whose default is yes
	// ("(Y/n)", "(y)") and ends the run at any other question.
	PromptsAnswer Policy = "answer"
	// PromptsYes answers yes to every yes/no question, whatever its
	// default, and ends the run at any other question.
	PromptsYes Policy = "yes"
	// PromptsKill ends the run at any question.
	PromptsKill Policy = "kill"
)

// Outcome is how a run ended.
type Outcome int

const (
	// Exited: the tool exited on its own; Result.Code holds its status.
	Exited Outcome = iota
	// Signaled: the tool died of Result.Signal that guard did not send.
	Signaled
	// TimedOut: the budget or the caller's context ran out.
	TimedOut
	// Stalled: no progress for Spec.Stall.
	Stalled
	// PromptKilled: the tool waited on a prompt guard would not answer.
	PromptKilled
	// StartFailed: the tool could not be started; Result.Err says why.
	StartFailed
	// Interrupted: guard got SIGINT, SIGTERM or SIGHUP (Result.Signal) and
	// forwarded it to the group; Result.Own says whether the tool then ended
	// by itself.
	Interrupted
)

func (o Outcome) String() string {
	switch o {
	case Exited:
		return "exited"
	case Signaled:
		return "signaled"
	case TimedOut:
		return "timeout"
	case Stalled:
		return "stall"
	case PromptKilled:
		return "prompt"
	case StartFailed:
		return "start-failed"
	case Interrupted:
		return "interrupted"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Exit statuses Status can return besides the tool's own: docs/exit-status-and-events.md,
// "Exit status of a shim call", 124 as coreutils timeout has it.
const (
	StatusTimeout       = 124
	StatusGuardFailed   = 125
	StatusNotExecutable = 126
	StatusNotFound      = 127
)

// Result is what happened in one run.
type Result struct {
	Outcome Outcome
	Code    int            // exit code when the tool exited (also kept when guard ended the run); see Own
	Signal  syscall.Signal // Signaled: the signal the tool died of; Interrupted: the signal guard got
	// Own, when Interrupted: the tool ended by itself after the forwarded
	// signal (its trap ran and exited, or the signal killed it) rather than
	// being killed by guard after the grace period. Code is then its status
	// as a shell reports it: the exit code, or 128+N when it died of N.
	Own      bool
	Stdout   *Output  // captured stdout (Spec.Capture); close it when done
	StdoutN  int64    // bytes the tool wrote to stdout when guard read it (Capture or a watchdog; under a pty: to the terminal); 0 when it wrote to guard's stdout itself
	Prompt   string   // last prompt detected, answered or not
	Answered []Answer // questions answered, in order
	Elapsed  time.Duration
	// Stopped is how much of Elapsed the tool spent stopped at a terminal
	// (Ctrl-Z), which no budget counts.
	Stopped time.Duration
	Pid     int   // the tool's pid, which is also its process group id; 0 if not started
	Err     error // start error, or the context's error when it ended the run
}

// Answer is a question guard answered and what it typed (without Enter).
type Answer struct{ Prompt, Reply string }

// Status is the exit status a shim returns for this result (docs/exit-status-and-events.md,
// "Exit status of a shim call"): the tool's own code, 128+N for a signal
// the tool died of, the tool's own answer to a signal guard forwarded
// (128+N only when guard had to kill it), 124 when guard ended the run, 126
// or 127 when the tool could not be started.
func (r Result) Status() int {
	switch r.Outcome {
	case Exited:
		return r.Code
	case Interrupted:
		if r.Own {
			return r.Code
		}
		return 128 + int(r.Signal)
	case Signaled:
		return 128 + int(r.Signal)
	case TimedOut, Stalled, PromptKilled:
		return StatusTimeout
	case StartFailed:
		return StartStatus(r.Err)
	}
	return StatusGuardFailed
}

// StartStatus maps an error from starting or exec'ing a tool to the shell's
// status: 127 when the file does not exist, 126 for every other failure
// (not executable, bad format, a directory), 0 for nil.
func StartStatus(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, syscall.ENOENT), errors.Is(err, exec.ErrNotFound):
		return StatusNotFound
	}
	return StatusNotExecutable
}
