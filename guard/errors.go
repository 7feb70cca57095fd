package guard

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/runner"
)

// The engine's steps return errors, never exit statuses; ExitStatus is the
// one place that turns an error into the status of "Exit status of a
// shim call" in docs/exit-status-and-events.md, and the caller prints the error once.

// guardError is guard's own failure (no HOME, a bad manifest, a shim loop):
// exit 125, with a line saying what to fix.
type guardError struct {
	err  error
	hint string // what to do next, on a line of its own; may be empty
}

func (e *guardError) Error() string {
	if e.hint == "" {
		return e.err.Error()
	}
	return e.err.Error() + "\n" + e.hint
}

func (e *guardError) Unwrap() error { return e.err }

// healError says what a call needs is missing and could not be brought
// back: exit 127. It wraps the cause, which may be an interruptedError.
type healError struct{ err error }

func (e *healError) Error() string { return withHint(e.err) }
func (e *healError) Unwrap() error { return e.err }

// interruptedError says a heal, or a call's wait for a detached one, was
// cut short by a signal to guard: the call ends with the shell's status
// for that signal, 128+N.
type interruptedError struct {
	signal syscall.Signal
	goesOn string // a detached heal the call waited for: it goes on, and how to follow it
}

func (e *interruptedError) Error() string {
	if e.goesOn != "" {
		return fmt.Sprintf("interrupted by %s while waiting; %s", unix.SignalName(e.signal), e.goesOn)
	}
	return fmt.Sprintf("interrupted by %s while healing; partial work is kept for the next call", unix.SignalName(e.signal))
}

// timedOutError says the call's budget ran out during a heal it waited on
// (a download, a rebuild, a package install): exit 124, as for a run past
// its budget. What the heal did so far is kept for the next call.
type timedOutError struct {
	err   error
	limit string // the budget and what set it: "5.0s (GUARD_TIMEOUT)"
}

func (e *timedOutError) Error() string {
	return "timed out: the call's budget of " + e.limit + " ran out during the heal: " + e.err.Error() +
		"\nrun guard heal to finish the heal without a call's budget"
}

func (e *timedOutError) Unwrap() error { return e.err }

// execError is a failed exec of the real tool: 127 when the file is gone,
// 126 for anything else (runner.StartStatus).
type execError struct{ err error }

func (e *execError) Error() string { return e.err.Error() }
func (e *execError) Unwrap() error { return e.err }

// StatusHealing is a call's exit status when a heal it needs goes on in
// the background: EX_TEMPFAIL, try again later.
const StatusHealing = 75

// fail tells the person why the call of name cannot go on and returns the
// call's exit status for err.
func (e *Engine) fail(name string, err error) int {
	e.Say("%s: %s", name, err)
	return ExitStatus(err)
}

// ExitStatus maps an error from the engine to a shim call's exit status:
// 0 for nil, 128+N for a heal interrupted by signal N, 75 for a heal that
// goes on in the background past the call's budget or a download whose
// sources stalled (call again later), 124 for a heal the
// call's budget ended, 125 when guard itself could not work, 126 or 127
// for an exec that failed, 127 for what could not be healed.
func ExitStatus(err error) int {
	var (
		ie *interruptedError
		he *healingError
		te *timedOutError
		ge *guardError
		ee *execError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ie):
		return 128 + int(ie.signal)
	case errors.As(err, &he), errors.As(err, new(*models.StalledError)):
		return StatusHealing
	case errors.As(err, &te):
		return runner.StatusTimeout
	case errors.As(err, &ge):
		return runner.StatusGuardFailed
	case errors.As(err, &ee):
		return runner.StartStatus(ee.err)
	}
	return runner.StatusNotFound
}

// interrupted returns the signal that cut a heal short, if err says one did.
func interrupted(err error) (syscall.Signal, bool) {
	var ie *interruptedError
	if errors.As(err, &ie) {
		return ie.signal, true
	}
	return 0, false
}

// withHint adds what to do about the file-system errors a heal meets most.
func withHint(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return msg + "\na folder guard writes to is read-only or not yours: set GUARD_STATE_DIR (guard's state) or use a writable model folder"
	case errors.Is(err, syscall.ENOSPC):
		return msg + "\nthe disk is full: free space, or put models and GUARD_STATE_DIR on a larger volume"
	}
	return msg
}
