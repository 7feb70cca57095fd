package guard

import (
	"context"
	"fmt"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// call is the call path after configuration: loop guard, resolve and heal
// the target, rewrite the arguments by the tool's policy, run.
func (e *Engine) call(ctx context.Context, name string, args []string) int {
	if d := e.c.Depth; d >= maxDepth {
		e.Event(heallog.Event{Level: "error", Event: heallog.Preflight, Tool: name, Reason: "shim loop", Result: "refused"})
		return e.fail(name, &guardError{err: fmt.Errorf("refused: the call went through shims %d times in a row (%s); a PATH that loops through two shim folders? run guard status", d, depthVar)})
	}
	tool := e.c.tool(name)
	switch {
	case isLlama(name):
		if e.c.Debug {
			e.debug("%s: llama policy: model heal, plan, budgets, prompt cache", name)
		}
		return e.llama(ctx, tool, args) // resolves and heals per attempt, with fallbacks
	case len(tool.Fallback) > 0:
		if e.c.Debug {
			e.debug("%s: fallback chain %v", name, tool.Fallback)
		}
		return e.chain(ctx, tool, args)
	}
	return e.plain(ctx, tool, shims.Forced(name, args, tool.Args, e.c.StdinTTY), e.c.Stdout)
}

// chain runs a tool with fallbacks, one attempt after another in the same
// loop as a llama call's, all within the cap: only a good attempt's output
// reaches stdout, and when every attempt failed the call ends with 2 and a
// line for each.
func (e *Engine) chain(ctx context.Context, tool *manifest.Tool, args []string) int {
	steps := []shims.ToolStep{{Name: tool.Name, Forced: tool.Args, Timeout: tool.Timeout.D()}}
	for _, f := range tool.Fallback {
		ft := e.c.tool(f)
		steps = append(steps, shims.ToolStep{Name: ft.Name, Forced: ft.Args, Timeout: ft.Timeout.D()})
	}
	clock := newCapClock(e.capBudget())
	attempts := shims.PlanFallbacks(steps, args, e.c.Timeout, clock.d)
	e.debugPlan(tool.Name, attempts)
	loop := &attemptLoop{e: e, ctx: ctx, clock: clock, name: tool.Name, attempts: attempts, o: &LlamaIO{W: e.c.Stdout}}
	return loop.run()
}
