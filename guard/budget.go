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

// budget is a call's own time limit and what set it, for messages. A heal
// the call waits on runs within what is left of it (README "Choices":
// "A heal a call waits on").
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
	if b.d <= 0 || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	if _, ok := interrupted(err); ok {
		return err
	}
	return &timedOutError{err: err, limit: secs(b.d) + " (" + b.source + ")"}
}

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
