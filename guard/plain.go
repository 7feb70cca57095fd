package guard

import (
	"context"
	"io"

	"github.com/sandbox-guard/guard/manifest"
)

// plain runs tool once: resolve, heal, then runTool (exec or supervise).
// With watch, the call's budget (GUARD_TIMEOUT or the tool's timeout)
// bounds the heal it waits on as well as the run.
func (e *Engine) plain(ctx context.Context, tool *manifest.Tool, args []string, out io.Writer, watch bool) int {
	var b budget
	if watch {
		b = e.toolBudget(tool)
	}
	if b.d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.d)
		defer cancel()
	}
	real, err := e.target(ctx, tool)
	if err != nil {
		return e.fail(tool.Name, b.during(ctx, err))
	}
	return e.runTool(ctx, tool, real, args, out, watch)
}
