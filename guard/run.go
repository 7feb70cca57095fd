package guard

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
)

// superviseTool runs the resolved tool once as a supervised child writing
// its stdout to out, when there is anything to watch (a budget, a stall or
// prompt policy); otherwise guard becomes the tool (execTool), so it costs
// nothing more. budget is what the call's budget (plain's toolBudget)
// leaves the run after any heal; 0 for none.
func (e *Engine) superviseTool(ctx context.Context, tool *manifest.Tool, real string, args []string, out io.Writer, budget time.Duration) int {
	if budget == 0 && tool.Stall == 0 && tool.Prompts == "" {
		return e.execTool(tool, real, args)
	}
	spec := e.spec(tool, real, append([]string{real}, args...), e.childEnv(tool))
	spec.Budget = budget
	spec.Stdout = out
	if e.c.Debug {
		e.debug("%s: supervise %s: budget %v, stall %v, prompts %q, pty %v", tool.Name, real, spec.Budget, spec.Stall, spec.Prompts, spec.PTY)
	}
	res := e.run(ctx, spec)
	e.report(tool.Name, 1, res, spec)
	return res.Status()
}

// execTool makes guard become the resolved tool: nothing to watch.
func (e *Engine) execTool(tool *manifest.Tool, real string, args []string) int {
	if e.c.Debug {
		e.debug("%s: exec %s (nothing to watch)", tool.Name, real)
	}
	if err := e.exec(real, append([]string{real}, args...), e.childEnv(tool)); err != nil {
		return e.fail(tool.Name, &execError{err})
	}
	return 0 // only a test's exec returns without error
}

// spec is the supervised-run template for tool; callers set budget and output.
func (e *Engine) spec(tool *manifest.Tool, real string, argv, env []string) runner.Spec {
	prompts := tool.Prompts
	if e.c.StdinTTY {
		// A person is at the terminal and can answer the tool themselves;
		// killing their password prompt would be worse than any hang.
		prompts = ""
	}
	observed := tool.Stall != 0 || prompts != ""
	return runner.Spec{
		Path:    real,
		Argv:    argv,
		Env:     env,
		Stdin:   e.c.Stdin,
		Stderr:  e.c.Stderr,
		Stall:   tool.Stall.D(),
		Grace:   e.c.M.Budget.Grace.D(),
		Prompts: runner.Policy(prompts),
		// Under a terminal the tool must still see one, or it changes how it
		// behaves (colours, prompts, line buffering); a pty lets guard watch.
		PTY: observed && e.c.StdoutTTY,
	}
}

// report logs and explains how a supervised attempt ended, when it did not
// simply exit.
func (e *Engine) report(name string, attempt int, res runner.Result, spec runner.Spec) {
	for _, a := range res.Answered {
		e.Say("%s: answered %s to %q", name, a.Reply, a.Prompt)
		e.Event(heallog.Event{Event: heallog.PromptDetected, Tool: name, Reason: a.Prompt, Result: "answered", Attempt: attempt})
	}
	ev := heallog.Event{Level: "warn", Tool: name, Attempt: attempt, DurationMS: res.Elapsed.Milliseconds()}
	switch res.Outcome {
	case runner.TimedOut:
		ev.Event, ev.Reason = heallog.Timeout, "no exit within "+spec.Budget.String()
		e.Say("%s: stopped after %s: over its time budget of %s", name, secs(res.Elapsed), secs(spec.Budget))
	case runner.Stalled:
		ev.Event, ev.Reason = heallog.Stall, "no output for "+spec.Stall.String()
		e.Say("%s: stopped: no new output for %s (the manifest's stall)", name, spec.Stall)
	case runner.PromptKilled:
		ev.Event, ev.Reason = heallog.PromptDetected, res.Prompt
		ev.Result = "killed"
		e.Say("%s: stopped: it waited at an interactive prompt %q that guard will not answer\n%s", name, res.Prompt, promptHint(name, spec.Prompts))
	case runner.StartFailed:
		ev.Event, ev.Reason, ev.Level = heallog.CallEnd, res.Err.Error(), "error"
		e.Say("%s: %v", name, res.Err)
	default:
		return
	}
	if ev.Result == "" {
		ev.Result = "killed"
	}
	e.Event(ev)
}

// promptHint says what to do about a question guard would not answer.
func promptHint(name string, policy runner.Policy) string {
	hint := "give the answer in the call (a flag, or the input on stdin)"
	switch policy {
	case runner.PromptsAnswer:
		hint += `; prompts = "yes" for ` + name + ` in the manifest answers yes to every yes/no question`
	case runner.PromptsKill:
		hint += `; the manifest's prompts = "kill" for ` + name + ` ends the call at any question`
	}
	return hint
}

// childEnv is guard's environment plus the tool's forced variables and one
// more level of shim depth.
func (e *Engine) childEnv(tool *manifest.Tool) []string {
	return toolEnv(e.c.Env, tool, e.c.Depth)
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s" }
