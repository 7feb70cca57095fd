package builds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// errHealLimit is the cause of a build's context when its own limit (the
// recipe's timeout, else the heal timeout) ends it, rather than a
// deadline of its caller's.
var errHealLimit = errors.New("the heal timeout")

// BuildError is a rebuild that did not produce a healthy target.
type BuildError struct {
	Name   string         // the recipe
	Log    string         // the build log, full output of every step
	Index  int            // 1-based step number; 0 for the clone
	Steps  int            // how many steps the recipe has
	Step   []string       // the failing step's argv; nil when every step passed
	Status int            // the step's exit status, -1 when it has none
	Signal syscall.Signal // the signal that ended the step, if any
	Target string         // set when the steps passed but the target is still unhealthy
	Reason string         // the target's health after the steps
	Last   string         // the last line of output
	Limit  time.Duration  // the heal timeout that stopped it; 0 when it was not what stopped it
	Err    error          // the underlying error (context.DeadlineExceeded on timeout)
	// Killed is set when guard stopped the step and a process of its
	// group was still alive after the grace (Grace): it was SIGKILLed.
	Killed bool
	Grace  time.Duration
}

func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "build %s: ", e.Name)
	switch {
	case e.Step == nil && e.Target != "":
		fmt.Fprintf(&b, "every step passed but %s is still unhealthy (%s)", e.Target, e.Reason)
	default:
		if e.Index == 0 {
			b.WriteString("clone")
		} else {
			fmt.Fprintf(&b, "step %d/%d", e.Index, e.Steps)
		}
		if e.Step != nil {
			fmt.Fprintf(&b, " (%s)", QuoteArgv(e.Step))
		}
		b.WriteString(" " + e.what())
		switch {
		case e.Killed:
			fmt.Fprintf(&b, ", and a process still ran after the %s grace and was killed: the next build removes what it cut short", e.Grace)
		case e.stopped():
			fmt.Fprintf(&b, " and ended within the %s grace: a clean stop, everything built so far is kept", e.Grace)
		}
	}
	if e.Last != "" {
		fmt.Fprintf(&b, "; last output: %q", clip(e.Last, 200))
	}
	if e.Log != "" {
		fmt.Fprintf(&b, "; see %s", e.Log)
	}
	return b.String()
}

// what says how the step ended.
func (e *BuildError) what() string {
	switch {
	case errors.Is(e.Err, context.DeadlineExceeded):
		if e.Limit > 0 {
			return fmt.Sprintf("was stopped by the heal timeout (%s)", e.Limit)
		}
		return "was stopped when its caller's time ran out"
	case errors.Is(e.Err, context.Canceled):
		return "was canceled"
	case e.Signal != 0:
		return fmt.Sprintf("was killed by signal %d (%s)", int(e.Signal), e.Signal)
	case e.Status >= 0:
		return fmt.Sprintf("exited with status %d", e.Status)
	case e.Err != nil:
		return fmt.Sprintf("could not run: %v", e.Err)
	}
	return "failed"
}

// stopped tells a step guard stopped (its limit, a cancel, a signal to
// guard) from one that ended by itself.
func (e *BuildError) stopped() bool {
	return errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled)
}

// interrupted tells a step that may have left outputs cut short: one guard
// had to SIGKILL after the grace, or one someone else killed by a signal.
// A step that ended by itself (with any status), or within the grace
// after guard's SIGTERM, left outputs make can judge.
func (e *BuildError) interrupted() bool {
	return e.Killed || e.Signal != 0 && !e.stopped()
}

// Unwrap gives errors.Is access to the cause (a timeout, a missing command).
func (e *BuildError) Unwrap() error { return e.Err }
