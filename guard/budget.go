package guard

import (
	"context"
	"errors"
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
