package guard

import (
	"cmp"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// Shim runs one call of the shim name with args (argv without argv[0]) and
// returns its exit status (the README's "Exit status of a shim call").
func Shim(name string, args []string, stderr io.Writer) int {
	c, err := LoadConfig(stderr)
	if err != nil {
		Tell(stderr, name+": "+LoadError(err))
		return runner.StatusGuardFailed
	}
	defer c.Close()
	c.Repair()
	return c.Call(context.Background(), name, args)
}

// Call is the call path after configuration: loop guard, resolve and heal
// the target, rewrite the arguments by the tool's policy, run.
func (c *Config) Call(ctx context.Context, name string, args []string) int {
	if d := callDepth(); d >= maxDepth {
		c.Event(heallog.Event{Level: "error", Event: "preflight", Tool: name, Reason: "shim loop", Result: "refused"})
		c.Say("%s: refused: the call went through shims %d times in a row (%s); a PATH that loops through two shim folders? run guard status", name, d, depthVar)
		return runner.StatusGuardFailed
	}
	tool := c.M.Tool(name)
	if tool == nil {
		tool = &manifest.Tool{Name: name} // a link made by hand: resolve and run it, nothing more
	}
	if isLlama(name) {
		return c.llama(ctx, tool, args) // resolves and heals per attempt, with fallbacks
	}
	real, status := c.Target(ctx, tool)
	if status != 0 {
		return status
	}
	if name == "npx" {
		args = shims.NpxArgs(args, tool.Args)
	} else if len(tool.Args) > 0 {
		args = shims.ForceArgs(args, tool.Args)
	}
	return c.runTool(ctx, tool, real, args, os.Stdout, true)
}

// runTool runs the resolved tool once. With watch and anything to watch (a
// budget from the manifest or GUARD_TIMEOUT, a stall or prompt policy) it is
// a supervised child writing its stdout to out; otherwise guard becomes the
// tool, so it costs nothing more.
func (c *Config) runTool(ctx context.Context, tool *manifest.Tool, real string, args []string, out io.Writer, watch bool) int {
	argv := append([]string{real}, args...)
	env := c.childEnv(tool)
	budget := cmp.Or(timeoutOverride(), tool.Timeout.D())
	if !watch || (budget == 0 && tool.Stall == 0 && tool.Prompts == "") {
		err := runner.Exec(real, argv, env)
		c.Say("%s: %v", tool.Name, err)
		return runner.StartStatus(err)
	}
	spec := c.spec(tool, real, argv, env)
	spec.Budget = budget
	spec.Stdout = out
	res := runner.Run(ctx, spec)
	c.report(tool.Name, 1, res, spec)
	return res.Status()
}

// spec is the supervised-run template for tool; callers set budget and output.
func (c *Config) spec(tool *manifest.Tool, real string, argv, env []string) runner.Spec {
	prompts := tool.Prompts
	if term.IsTerminal(int(os.Stdin.Fd())) {
		// A person is at the terminal and can answer the tool themselves;
		// killing their password prompt would be worse than any hang.
		prompts = ""
	}
	observed := tool.Stall != 0 || prompts != ""
	return runner.Spec{
		Path:    real,
		Argv:    argv,
		Env:     env,
		Stdin:   os.Stdin,
		Stderr:  os.Stderr,
		Stall:   tool.Stall.D(),
		Grace:   c.M.Budget.Grace.D(),
		Prompts: runner.Policy(prompts),
		// Under a terminal the tool must still see one, or it changes how it
		// behaves (colours, prompts, line buffering); a pty lets guard watch.
		PTY: observed && progress.IsTerminal(os.Stdout),
	}
}

// report logs and explains how a supervised attempt ended, when it did not
// simply exit.
func (c *Config) report(name string, attempt int, res runner.Result, spec runner.Spec) {
	for _, p := range res.Answered {
		c.Event(heallog.Event{Event: "prompt.detected", Tool: name, Reason: p, Result: "answered", Attempt: attempt})
	}
	ev := heallog.Event{Level: "warn", Tool: name, Attempt: attempt, DurationMS: res.Elapsed.Milliseconds()}
	switch res.Outcome {
	case runner.TimedOut:
		ev.Event, ev.Reason = "timeout", "no exit within "+spec.Budget.String()
		c.Say("%s: stopped after %s: over its time budget of %s", name, secs(res.Elapsed), secs(spec.Budget))
	case runner.Stalled:
		ev.Event, ev.Reason = "stall", "no output for "+spec.Stall.String()
		c.Say("%s: stopped: no new output for %s (the manifest's stall)", name, spec.Stall)
	case runner.PromptKilled:
		ev.Event, ev.Reason = "prompt.detected", res.Prompt
		ev.Result = "killed"
		c.Say("%s: stopped: it waited at an interactive prompt %q that guard will not answer", name, res.Prompt)
	case runner.StartFailed:
		ev.Event, ev.Reason, ev.Level = "call.end", res.Err.Error(), "error"
		c.Say("%s: %v", name, res.Err)
	default:
		return
	}
	if ev.Result == "" {
		ev.Result = "killed"
	}
	c.Event(ev)
}

// childEnv is guard's environment plus the tool's forced variables and one
// more level of shim depth.
func (c *Config) childEnv(tool *manifest.Tool) []string {
	env := os.Environ()
	for k, v := range tool.Env {
		env = setEnv(env, k, v)
	}
	return setEnv(env, depthVar, strconv.Itoa(callDepth()+1))
}

// setEnv sets key in env, dropping earlier entries: with a duplicate, a Go
// child (the next guard of a shim loop) reads the first one, so an
// appended GUARD_DEPTH never grew and the loop never ended.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// isLlama reports whether name gets the llama policy: model heal, budgets,
// fallbacks and the prompt cache.
func isLlama(name string) bool { return name == shims.LlamaCompletion || name == shims.LlamaSimple }

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s" }
