package guard

import (
	"context"
	"fmt"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/shims"
)

// call is the call path after configuration: loop guard, resolve and heal
// the target, rewrite the arguments by the tool's policy, run.
func (e *Engine) call(ctx context.Context, name string, args []string) int {
	if d := e.c.Depth; d >= maxDepth {
		e.Event(heallog.Event{Level: "error", Event: "preflight", Tool: name, Reason: "shim loop", Result: "refused"})
		return e.fail(name, &guardError{err: fmt.Errorf("refused: the call went through shims %d times in a row (%s); a PATH that loops through two shim folders? run guard status", d, depthVar)})
	}
	tool := e.c.tool(name)
	if isLlama(name) {
		return e.llama(ctx, tool, args) // resolves and heals per attempt, with fallbacks
	}
	real, err := e.target(ctx, tool)
	if err != nil {
		return e.fail(tool.Name, err)
	}
	if name == "npx" {
		args = shims.NpxArgs(args, tool.Args)
	} else if len(tool.Args) > 0 {
		args = shims.ForceArgs(args, tool.Args)
	}
	return e.runTool(ctx, tool, real, args, e.c.Stdout, true)
}

// isLlama reports whether name gets the llama policy: model heal, budgets,
// fallbacks and the prompt cache.
func isLlama(name string) bool { return name == shims.LlamaCompletion || name == shims.LlamaSimple }
