package guard

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// budget is a call's own time limit and what set it, for messages. The
// call waits on a heal within what is left of it; the heal itself goes on
// past it, detached (docs/decisions.md: "A heal a call waits on").
type budget struct {
	d      time.Duration
	source string // GUARD_TIMEOUT, [tools.NAME] timeout, [budget] cap
}

// capBudget is the most one call with attempts (a llama call, a fallback
// chain) may take, all attempts and heals together.
func (e *Engine) capBudget() budget {
	switch {
	case e.c.Timeout > 0:
		return budget{e.c.Timeout, "GUARD_TIMEOUT"}
	case e.c.M.Budget.Cap.D() > 0:
		return budget{e.c.M.Budget.Cap.D(), "[budget] cap"}
	}
	return budget{shims.DefaultCap, "the default cap"}
}

// capClock is the cap of a call with attempts (a llama call, a fallback
// chain) as a deadline that the time a tool spends stopped at a terminal
// (Ctrl-Z) moves on, as the runner's own budget does: the heals of the call
// run within ctx, each run gets what is left as its runner budget.
type capClock struct {
	budget
	deadline time.Time
}

func newCapClock(b budget) *capClock { return &capClock{budget: b, deadline: time.Now().Add(b.d)} }

// left is what remains of the cap.
func (c *capClock) left() time.Duration { return time.Until(c.deadline) }

// ctx bounds a heal by what remains of the cap.
func (c *capClock) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(parent, c.deadline)
}

// runBudget is a run's budget: the attempt's own, bud, cut to what is
// left of the cap. The few milliseconds the call spent before this run do
// not count against a budget the cap equals (GUARD_TIMEOUT sets both), so
// the run is given the budget the person asked for.
func (c *capClock) runBudget(bud time.Duration) time.Duration {
	left := c.left()
	switch {
	case bud > 0 && bud <= left+50*time.Millisecond:
		return bud
	case left > time.Millisecond:
		return left
	}
	return time.Millisecond
}

// pause moves the cap on by d, a time the tool spent stopped.
func (c *capClock) pause(d time.Duration) { c.deadline = c.deadline.Add(d) }

// toolBudget is one plain call's budget: GUARD_TIMEOUT, else the tool's
// timeout; none (zero) when neither is set.
func (e *Engine) toolBudget(tool *manifest.Tool) budget {
	switch {
	case e.c.Timeout > 0:
		return budget{e.c.Timeout, "GUARD_TIMEOUT"}
	case tool.Timeout > 0:
		return budget{tool.Timeout.D(), "[tools." + tool.Name + "] timeout"}
	}
	return budget{}
}

// during is err from a heal the call waited on, as a *timedOutError when
// the call's budget (ctx's deadline) is what ended it.
func (b budget) during(ctx context.Context, err error) error {
	var he *healingError
	if errors.As(err, &he) {
		he.limit = b.describe()
		return err
	}
	if b.d <= 0 || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	if _, ok := interrupted(err); ok {
		return err
	}
	return &timedOutError{err: err, limit: b.describe()}
}

// describe is the budget and what set it: "4.0s (GUARD_TIMEOUT)".
func (b budget) describe() string { return secs(b.d) + " (" + b.source + ")" }

// debugPlan prints a call's planned attempts (GUARD_DEBUG=1, --verbose).
func (e *Engine) debugPlan(name string, attempts []shims.Attempt) {
	if !e.c.Debug {
		return
	}
	for i, a := range attempts {
		e.debug("%s: plan %d: %s %s, budget %s: %s", name, i+1, describe(a), a.Trigger, secs(a.Budget), strings.Join(a.Args, " "))
	}
}

// describe names an attempt for the log: its tool, and its model if any.
func describe(a shims.Attempt) string {
	if a.Model == "" {
		return a.Tool
	}
	return a.Tool + " " + filepath.Base(a.Model)
}
