package builds

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

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
	Limit  time.Duration  // the heal timeout in force
	Err    error          // the underlying error (context.DeadlineExceeded on timeout)
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
		return "was stopped by the heal timeout"
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

// interrupted tells a step stopped from outside (the heal timeout, a
// cancel, a signal) from one that ended on its own, with any status.
func (e *BuildError) interrupted() bool {
	return errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) || e.Signal != 0
}

// Unwrap gives errors.Is access to the cause (a timeout, a missing command).
func (e *BuildError) Unwrap() error { return e.Err }
