package guard

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/promptcache"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// llama runs a llama.cpp tool call so that it ends within its budget with
// an answer or a clear error: heal the model, plan the attempts (forced
// -no-cnv, tuned defaults, a timeout fallback model, llama-simple after a
// failure), answer repeats from the prompt cache, and run each attempt
// supervised.
func (c *Config) llama(ctx context.Context, tool *manifest.Tool, args []string) int {
	return c.llamaCall(ctx, tool, args, &llamaIO{W: os.Stdout})
}

// llamaIO is where one llama call's answer goes and what it reports back;
// the shims and every swarm role share this one code path.
type llamaIO struct {
	W        io.Writer     // the answer (stdout for a shim call)
	Budget   time.Duration // replaces every attempt's budget when > 0 (a swarm role); the cap stays
	NoDirect bool          // never exec: the caller needs the answer back (guard ask)

	Attempts int    // attempts run
	Cached   bool   // answered from the prompt cache
	Model    string // model file of the answer
}

func (c *Config) llamaCall(ctx context.Context, tool *manifest.Tool, args []string, o *llamaIO) int {
	stdinTTY := term.IsTerminal(int(os.Stdin.Fd()))
	call, err := parseLlama(tool.Name, args)
	if err != nil {
		// The tool's own parser says it better; guard adds nothing to a
		// call it cannot read.
		return c.direct(ctx, tool, args, o, true)
	}
	if call.Interactive && stdinTTY && !o.NoDirect {
		return c.direct(ctx, tool, args, o, false) // a person is chatting: no budget, no watchdog
	}
	modelPath := call.Model
	if modelPath != "" {
		modelPath = absPath(modelPath)
		if err := c.ensureModel(ctx, tool.Name, modelPath, false); err != nil {
			c.Say("%s: %s", tool.Name, withHint(err))
			if ie, ok := interrupted(err); ok {
				return ie.Status()
			}
			return runner.StatusNotFound
		}
	}
	in := shims.LlamaPlanInput{
		Tool:          tool.Name,
		Args:          args,
		StdinTTY:      stdinTTY,
		Defaults:      tool.Defaults,
		Cap:           c.M.Budget.Cap.D(),
		Override:      cmp.Or(o.Budget, timeoutOverride()),
		FallbackTools: tool.Fallback,
		Model:         c.modelInfo(modelPath),
	}
	if call.PromptFile != "" {
		text, err := os.ReadFile(call.PromptFile)
		if err != nil {
			return c.direct(ctx, tool, args, o, true) // the tool reports the unreadable file itself
		}
		in.PromptFileText = string(text)
	}
	attempts, err := shims.PlanLlama(in)
	if err != nil {
		return c.direct(ctx, tool, args, o, true)
	}
	return c.runAttempts(ctx, tool.Name, attempts, c.promptCache(tool, in.PromptFileText), o)
}

// runAttempts runs the plan: the first attempt, then each later one whose
// trigger matches how the one before ended, all within the budget cap. An
// attempt the prompt cache can answer is not run.
func (c *Config) runAttempts(ctx context.Context, name string, attempts []shims.Attempt, pc *promptCache, o *llamaIO) int {
	limit := c.capFor()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var lines []string
	var last runner.Result
	ran := 0
	after := shims.First
	for i, a := range attempts {
		if i > 0 && a.Trigger != after {
			continue
		}
		if ctx.Err() != nil {
			lines = append(lines, fmt.Sprintf("%s: not run: the call's cap of %s was used up", a.Tool, limit))
			break
		}
		if i > 0 {
			c.Event(heallog.Event{Level: "warn", Event: "fallback", Tool: name, Target: a.Tool + " " + filepath.Base(a.Model), Reason: after.String(), Attempt: ran + 1})
			c.Say("%s: trying %s with %s (%s)", name, a.Tool, filepath.Base(a.Model), after)
		}
		if e, ok := c.cachedAnswer(pc, name, a, ran+1); ok {
			o.W.Write(e.Stdout)
			o.Cached, o.Model = true, filepath.Base(a.Model)
			if i > 0 {
				c.Event(heallog.Event{Event: "call.end", Tool: name, Result: "ok", Attempt: ran + 1, Reason: "answered from the prompt cache for " + a.Tool + " " + filepath.Base(a.Model)})
			}
			return 0
		}
		ran++
		o.Attempts, o.Model = ran, filepath.Base(a.Model)
		if i == 0 && len(a.Dropped) > 0 {
			// -i/-if without a terminal: they would wait on stdin for good.
			c.Event(heallog.Event{Event: "preflight", Tool: name, Reason: "flags that would wait on stdin with no terminal, dropped: " + strings.Join(a.Dropped, " "), Attempt: ran})
		}
		if i > 0 && len(a.Dropped) > 0 {
			c.Event(heallog.Event{Event: "fallback", Tool: a.Tool, Reason: "flags this attempt cannot pass on: " + strings.Join(a.Dropped, " "), Attempt: ran})
		}
		// A call with fallbacks prints only an answer that proved good, the
		// last attempt's too: one that ends in exit 2 leaves stdout empty, so
		// a script never takes half an answer for one. A shim call with no
		// fallback streams, as the tool would without guard; a swarm role
		// never does, since its text is the answer or nothing.
		var live io.Writer
		if len(attempts) == 1 && !o.NoDirect {
			live = o.W
		}
		res, why := c.attempt(ctx, name, ran, a, live)
		last = res
		if why == "" {
			if live == nil {
				o.W.Write(res.Stdout)
			}
			c.storeAnswer(pc, name, a, res)
			if ran > 1 {
				c.Event(heallog.Event{Event: "call.end", Tool: name, Result: "ok", Attempt: ran, Reason: "answered by " + a.Tool + " " + filepath.Base(a.Model)})
			}
			return 0
		}
		lines = append(lines, fmt.Sprintf("attempt %d: %s model %s: %s after %s", ran, a.Tool, filepath.Base(a.Model), why, secs(res.Elapsed)))
		if res.Outcome == runner.Interrupted {
			return res.Status() // the person or the harness asked to stop: no fallback
		}
		switch res.Outcome {
		case runner.TimedOut, runner.Stalled:
			after = shims.AfterTimeout
		default:
			after = shims.AfterFailure
		}
	}
	c.Event(heallog.Event{Level: "error", Event: "call.end", Tool: name, Result: "failed", Attempt: ran, Reason: strings.Join(lines, "; ")})
	if len(attempts) == 1 {
		if last.Outcome == runner.Exited && last.Code == 0 {
			c.Say("%s: the tool exited 0 but printed nothing on stdout", name)
		}
		return last.Status()
	}
	c.Say("%s: every attempt failed:", name)
	for _, l := range lines {
		fmt.Fprintln(c.Stderr, "  "+l)
	}
	return 2
}

// attempt runs one planned attempt and says why it failed ("" on success).
func (c *Config) attempt(ctx context.Context, name string, n int, a shims.Attempt, live io.Writer) (runner.Result, string) {
	tool := c.M.Tool(a.Tool)
	if tool == nil {
		tool = &manifest.Tool{Name: a.Tool}
	}
	if a.Model != "" && n > 1 {
		if err := c.ensureModel(ctx, a.Tool, a.Model, false); err != nil {
			c.Say("%s: %s", a.Tool, withHint(err))
			if ie, ok := interrupted(err); ok {
				return runner.Result{Outcome: runner.Interrupted, Signal: ie.Signal, Err: err}, "interrupted"
			}
			return runner.Result{Outcome: runner.StartFailed, Err: fmt.Errorf("%w: %v", exec.ErrNotFound, err)}, "model not available"
		}
	}
	real, status := c.Target(ctx, tool)
	if status > 128 {
		sig := syscall.Signal(status - 128)
		return runner.Result{Outcome: runner.Interrupted, Signal: sig}, "interrupted"
	}
	if status != 0 {
		return runner.Result{Outcome: runner.StartFailed, Err: fmt.Errorf("%w: %s cannot be healed", exec.ErrNotFound, a.Tool)}, "binary missing and not healed"
	}
	spec := c.spec(tool, real, append([]string{real}, a.Args...), c.childEnv(tool))
	spec.PTY = false // stdout must stay apart from the logs: it is the answer, checked and cached
	spec.Capture = true
	spec.Budget = a.Budget
	spec.Stdout = live
	res := runner.Run(ctx, spec)
	c.report(name, n, res, spec)
	switch {
	case res.Outcome == runner.Exited && res.Code == 0 && res.StdoutN == 0:
		return res, "exit 0 with nothing on stdout"
	case res.Outcome == runner.Exited && res.Code == 0:
		return res, ""
	case res.Outcome == runner.Exited:
		return res, "exit " + strconv.Itoa(res.Code)
	case res.Outcome == runner.TimedOut:
		return res, "timeout (budget " + secs(a.Budget) + ")"
	case res.Outcome == runner.Stalled:
		return res, "stalled"
	case res.Outcome == runner.PromptKilled:
		return res, "waited at a prompt " + strconv.Quote(res.Prompt)
	case res.Outcome == runner.Signaled, res.Outcome == runner.Interrupted:
		return res, "killed by signal " + strconv.Itoa(int(res.Signal))
	}
	return res, res.Outcome.String()
}

// direct runs the tool with no plan: resolve, heal, run. With watch, the
// manifest's timeout (or GUARD_TIMEOUT), stall and prompt policy for the
// tool still apply, as for any other shimmed tool: a call guard cannot plan
// (a llama tool it has no plan for, arguments it cannot read) must still
// end. Without them, or for a person chatting, guard becomes the tool. A
// caller that needs the answer back gets exit 2 instead, since guard cannot
// read the call.
func (c *Config) direct(ctx context.Context, tool *manifest.Tool, args []string, o *llamaIO, watch bool) int {
	if o.NoDirect {
		c.Say("%s: cannot plan this call: %s", tool.Name, strings.Join(args, " "))
		return 2
	}
	real, status := c.Target(ctx, tool)
	if status != 0 {
		return status
	}
	return c.runTool(ctx, tool, real, args, o.W, watch)
}

func parseLlama(tool string, args []string) (shims.LlamaCall, error) {
	if tool == shims.LlamaSimple {
		return shims.ParseSimple(args)
	}
	return shims.ParseCompletion(args)
}

// modelInfo is the plan's view of the call's model and its timeout fallback.
func (c *Config) modelInfo(path string) shims.ModelInfo {
	info := shims.ModelInfo{Path: path}
	m := c.M.ModelByFile(filepath.Base(path))
	if path == "" || m == nil {
		return info
	}
	info.Base, info.TPS = m.Budget.Base.D(), m.Budget.TokensPerSecond
	if fb := c.M.FallbackModel(m); fb != nil && fb != m {
		// The fallback lives beside the call's model: the folder the agent
		// uses is the one that has room and survives.
		info.FallbackPath = filepath.Join(filepath.Dir(path), fb.File)
		info.FallbackBase, info.FallbackTPS = fb.Budget.Base.D(), fb.Budget.TokensPerSecond
	}
	return info
}

func (c *Config) capFor() time.Duration {
	if d := timeoutOverride(); d > 0 {
		return d
	}
	if d := c.M.Budget.Cap.D(); d > 0 {
		return d
	}
	return shims.DefaultCap
}

// timeoutOverride reads GUARD_TIMEOUT: a Go duration ("90s") or seconds.
func timeoutOverride() time.Duration {
	v := os.Getenv("GUARD_TIMEOUT")
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	return 0
}

// promptCache is the prompt cache as one llama call uses it, or nil when
// caching is off for the call (GUARD_CACHE=off, the tool's cache = false).
// Each attempt has its own key, so a stored answer is always what that
// attempt's tool and model printed: a repeat is answered for the attempt
// that answered before, after the attempts that failed before are tried
// again, and the answer names the model it really came from.
type promptCache struct {
	store    *promptcache.Store
	fileText string // text of the call's -f file, part of every key
}

func (c *Config) promptCache(tool *manifest.Tool, fileText string) *promptCache {
	if os.Getenv("GUARD_CACHE") == "off" || (tool.Cache != nil && !*tool.Cache) {
		return nil
	}
	return &promptCache{store: c.cacheStore(), fileText: fileText}
}

// cachedAnswer looks attempt a up and logs a hit.
func (c *Config) cachedAnswer(pc *promptCache, name string, a shims.Attempt, n int) (promptcache.Entry, bool) {
	key := c.cacheKey(pc, a)
	if key == "" {
		return promptcache.Entry{}, false
	}
	e, ok, _ := pc.store.Get(key)
	if ok {
		c.Event(heallog.Event{Event: "cache.hit", Tool: name, Target: a.Model, Bytes: int64(len(e.Stdout)), Result: "ok", Attempt: n})
	}
	return e, ok
}

// storeAnswer caches attempt a's good answer and logs what became of it: an
// answer larger than the whole cache, or a cache folder guard cannot write,
// is not stored, and the log must not say it was.
func (c *Config) storeAnswer(pc *promptCache, name string, a shims.Attempt, res runner.Result) {
	// The key is made again: a heal may have replaced the model meanwhile.
	key := c.cacheKey(pc, a)
	if key == "" {
		return
	}
	ev := heallog.Event{Event: "cache.store", Tool: name, Target: a.Model, Bytes: int64(len(res.Stdout)), Result: "ok"}
	if err := pc.store.Put(key, promptcache.Entry{Stdout: res.Stdout, Seconds: res.Elapsed.Seconds()}); err != nil {
		ev.Level, ev.Result, ev.Reason = "warn", "skipped", err.Error()
	}
	c.Event(ev)
}

// cacheKey returns attempt a's prompt-cache key, or "" when it has none
// (caching off, no model, a model that cannot be read).
func (c *Config) cacheKey(pc *promptCache, a shims.Attempt) string {
	if pc == nil || a.Model == "" {
		return ""
	}
	var pinned string
	if m := c.M.ModelByFile(filepath.Base(a.Model)); m != nil {
		pinned = m.SHA256
	}
	id, err := promptcache.ModelID(a.Model, pinned)
	if err != nil {
		return ""
	}
	args := make([]string, len(a.Args))
	for i, arg := range a.Args {
		if arg == a.Model {
			arg = "model:" + id // the same model anywhere on disk is the same answer
		}
		args[i] = arg
	}
	in := promptcache.KeyInput{Tool: a.Tool, ModelID: id, Args: args}
	if pc.fileText != "" {
		in.FileText = []byte(pc.fileText)
	}
	return promptcache.Key(in)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
