package guard

import (
	"context"
	"io"
	"time"

	"github.com/sandbox-guard/guard/manifest"
)

// plain runs tool once, watched: resolve, heal, then supervise it
// (superviseTool, which execs when there is nothing to watch). The call's
// budget (GUARD_TIMEOUT or the tool's timeout) bounds the wait for a heal
// as well as the run: the run gets what the wait left, and the heal goes
// on past it, detached. The run's share is the runner's own budget, not a
// deadline on ctx, so that time the tool spends stopped (Ctrl-Z) is not
// counted.
func (e *Engine) plain(ctx context.Context, tool *manifest.Tool, args []string, out io.Writer) int {
	b := e.toolBudget(tool)
	real, left, status := e.healForRun(ctx, tool, b)
	if real == "" {
		return status
	}
	return e.superviseTool(ctx, tool, real, args, out, left)
}

// becomeTool runs tool once, unwatched: resolve, heal, then guard becomes
// the tool (execTool), with no budget and no watchdog: a person chatting
// at a terminal.
func (e *Engine) becomeTool(ctx context.Context, tool *manifest.Tool, args []string) int {
	real, _, status := e.healForRun(ctx, tool, budget{})
	if real == "" {
		return status
	}
	return e.execTool(tool, real, args)
}

// healForRun resolves tool and heals it when it must, the wait bounded by
// b; it returns the executable and what b leaves the run (0 for no
// budget), or "" and the call's exit status when no executable is healthy.
func (e *Engine) healForRun(ctx context.Context, tool *manifest.Tool, b budget) (real string, left time.Duration, status int) {
	healCtx := ctx
	if b.d > 0 {
		var cancel context.CancelFunc
		healCtx, cancel = context.WithTimeout(ctx, b.d)
		defer cancel()
	}
	h := e.checkTool(tool)
	real, healed := h.Path, time.Duration(0)
	if !h.OK() {
		began := time.Now()
		var err error
		if real, err = e.healTool(healCtx, tool, h, healAsJob); err != nil {
			return "", 0, e.fail(tool.Name, b.during(healCtx, err))
		}
		healed = time.Since(began)
	}
	left = b.d
	if left > 0 {
		left = max(left-healed, time.Millisecond)
	}
	return real, left, 0
}
