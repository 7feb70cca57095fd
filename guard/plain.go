package guard

import (
	"context"
	"io"
	"time"

	"github.com/sandbox-guard/guard/manifest"
)

// plain runs tool once: resolve, heal, then runTool (exec or supervise).
// With watch, the call's budget (GUARD_TIMEOUT or the tool's timeout)
// bounds the wait for a heal as well as the run: the run gets what the
// wait left, and the heal goes on past it, detached. The run's share is the runner's own budget, not a deadline on
// ctx, so that time the tool spends stopped (Ctrl-Z) is not counted.
func (e *Engine) plain(ctx context.Context, tool *manifest.Tool, args []string, out io.Writer, watch bool) int {
	var b budget
	if watch {
		b = e.toolBudget(tool)
	}
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
		if real, err = e.healTool(healCtx, tool, h, true); err != nil {
			return e.fail(tool.Name, b.during(healCtx, err))
		}
		healed = time.Since(began)
	}
	left := b.d
	if left > 0 {
		left = max(left-healed, time.Millisecond)
	}
	return e.runTool(ctx, tool, real, args, out, watch, left)
}
