package guard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/guard/speed"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// llama runs a llama.cpp tool call so that it ends within its budget with
// an answer or a clear error: heal the model, plan the attempts (forced
// -no-cnv, tuned defaults, a timeout fallback model, llama-simple after a
// failure), answer repeats from the prompt cache, and run each attempt
// supervised.
func (e *Engine) llama(ctx context.Context, tool *manifest.Tool, args []string) int {
	return e.Llama(ctx, tool, args, &LlamaIO{W: e.c.Stdout})
}

// LlamaIO is where one llama call's answer goes and what it reports back;
// the shims and every swarm role share this one code path.
type LlamaIO struct {
	W        io.Writer     // the answer (stdout for a shim call)
	Budget   time.Duration // replaces every attempt's budget when > 0 (a swarm role); the cap stays
	NoDirect bool          // never exec: the caller needs the answer back (guard ask)

	Attempts int    // attempts run
	Cached   bool   // answered from the prompt cache
	Model    string // model file of the answer
}

// maxPromptFile bounds the -f file guard reads for the cache key and for
// llama-simple's prompt: far above any model's context. A larger one is
// left to the tool, uncached.
const maxPromptFile = 1 << 20

// Llama is one llama.cpp tool call with its answer going to o.W; it
// returns the call's exit status.
func (e *Engine) Llama(ctx context.Context, tool *manifest.Tool, args []string, o *LlamaIO) int {
	stdinTTY := e.c.StdinTTY
	call, err := parseLlama(tool.Name, args)
	if err != nil {
		// The tool's own parser says it better; guard adds nothing to a
		// call it cannot read.
		e.debug("%s: cannot plan (%v): running it as given", tool.Name, err)
		return e.direct(ctx, tool, args, o, true)
	}
	if call.Interactive && stdinTTY && !o.NoDirect {
		if e.c.Debug {
			e.debug("%s: a person is chatting at a terminal: no plan", tool.Name)
		}
		return e.direct(ctx, tool, args, o, false) // a person is chatting: no budget, no watchdog
	}
	// The cap bounds everything the call does from here, heals included.
	clock := newCapClock(e.capBudget())
	hctx, cancel := clock.ctx(ctx)
	defer cancel()
	if e.c.Debug {
		e.debug("%s: budget %s (%s) for the whole call", tool.Name, secs(clock.d), clock.source)
	}
	modelPath := call.Model
	var healing *healingError // the call's model, downloading in the background
	if modelPath != "" {
		modelPath = state.Abs(modelPath)
		answerNow := false
		wait := func(ctx context.Context) context.Context {
			ctx, answerNow = e.modelWait(ctx, tool, modelPath)
			return ctx
		}
		if err := e.ensureModelWaiting(hctx, tool.Name, modelPath, false, wait); err != nil {
			err = clock.during(hctx, err)
			switch {
			case errors.As(err, &healing):
				healing.cannotFit = healing.cannotFit || answerNow
				// Its download goes on in the background: the plan's
				// fallbacks may still answer from what is healthy now.
			case !e.stateFault(err):
				return e.fail(tool.Name, err)
			default:
				// Guard's own folder failed it, not the model: fail open.
				e.Say("%s: %v\nrunning the call without the heal: guard cannot write its state folder %s (set GUARD_STATE_DIR to a folder of your own)", tool.Name, err, e.c.StateDir)
			}
		}
	}
	in := shims.LlamaPlanInput{
		Tool:          tool.Name,
		Args:          args,
		StdinTTY:      stdinTTY,
		Defaults:      tool.Defaults,
		Cap:           e.c.M.Budget.Cap.D(),
		Override:      cmp.Or(o.Budget, e.c.Timeout),
		FallbackTools: tool.Fallback,
		Model:         e.modelInfo(modelPath),
	}
	if call.PromptFile != "" {
		text, read, err := readPromptFile(call.PromptFile)
		if err != nil {
			return e.direct(hctx, tool, args, o, true) // the tool reports the unreadable file itself
		}
		in.PromptFileText, in.PromptFileUnread = text, !read
		if !read {
			e.debug("%s: -f %s is not a regular file of at most %d bytes: left to the tool, uncached", tool.Name, call.PromptFile, maxPromptFile)
		}
	}
	attempts, err := shims.PlanLlama(in)
	if err != nil {
		return e.direct(hctx, tool, args, o, true)
	}
	e.debugPlan(tool.Name, attempts)
	var pc *promptCache
	if !in.PromptFileUnread {
		pc = e.promptCache(tool, in.PromptFileText)
	}
	return e.runAttempts(ctx, clock, tool.Name, attempts, pc, o, healing)
}

// modelWait is how long a call waits for its model's heal (the model is
// not healthy): within ctx, or not at all when its fallback model is
// healthy (answerNow): the fallback answers now, in the budget the wait
// would have spent, and the download goes on in the background for the
// next calls. A model that is here and only waits for its first hash is
// not skipped so: the hash is part of the call when it fits what is left
// of the budget (docs/llama-calls.md).
func (e *Engine) modelWait(ctx context.Context, tool *manifest.Tool, path string) (context.Context, bool) {
	fb := e.modelInfo(path).FallbackPath
	if fb == "" || !e.healthyNow(tool, fb) || e.hashFits(ctx, path) {
		return ctx, false
	}
	now, cancel := context.WithDeadline(ctx, time.Now())
	context.AfterFunc(ctx, cancel)
	return now, true
}

// readPromptFile reads a -f file for the cache key and llama-simple's
// prompt. Only a regular file of at most maxPromptFile bytes is read: a
// pipe (-f /dev/stdin, -f <(echo ...)) or a device is never opened, since
// even a non-blocking open of a FIFO lets its writer go on, and what guard
// read would be gone for the tool. read false says the file is left to
// the tool; an error (a missing file) leaves the whole call to it.
func readPromptFile(path string) (text string, read bool, err error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return "", false, nil
	}
	data, err := state.ReadRegular(path, maxPromptFile, false)
	switch {
	case err == nil:
		return string(data), true, nil
	case errors.Is(err, state.ErrNotRegular), errors.Is(err, state.ErrTooLarge):
		return "", false, nil
	}
	return "", false, err
}

// runAttempts runs the plan of a llama call or a fallback chain: the first
// attempt, then each later one whose trigger follows how the one before
// ended, all within the call's cap, clock. An attempt the
// prompt cache can answer is not run; llama-completion's empty answer is
// retried once before the plan moves on.
//
// A heal an attempt needs that goes on in the background past the call's
// budget (healing, when the call's model was found so before the plan)
// ends that attempt as a timeout does; the later attempts run only with
// what is healthy now, and when none answers the call ends with 75 and
// the heal's one line, not 2: time was the only problem.
func (e *Engine) runAttempts(ctx context.Context, clock *capClock, name string, attempts []shims.Attempt, pc *promptCache, o *LlamaIO, healing *healingError) int {
	var lines []string
	var last runner.Result
	ran := 0
	after := shims.First
	for i, a := range attempts {
		if i > 0 && !a.Trigger.Follows(after) {
			continue
		}
		if i == 0 && healing != nil {
			lines = append(lines, fmt.Sprintf("%s: not run: %s goes on in the background", withModel(a), healing.rec.What))
			after = shims.AfterTimeout
			continue
		}
		if ctx.Err() != nil || clock.left() <= 0 {
			lines = append(lines, fmt.Sprintf("%s: not run: the call's budget of %s (%s) was used up", a.Tool, secs(clock.d), clock.source))
			break
		}
		if i > 0 {
			e.Event(heallog.Event{Level: "warn", Event: heallog.Fallback, Tool: name, Target: describe(a), Reason: after.String(), Attempt: ran + 1})
			if healing == nil {
				e.Say("%s: trying %s (%s)", name, withModel(a), after)
			}
		}
		if entry, ok := e.cachedAnswer(pc, a); ok {
			o.W.Write(entry.Stdout)
			o.Cached, o.Model = true, filepath.Base(a.Model)
			if i > 0 {
				e.Event(heallog.Event{Event: heallog.CallEnd, Tool: name, Result: "ok", Attempt: ran + 1, Reason: "answered from the prompt cache for " + describe(a)})
			}
			return 0
		}
		ran++
		o.Attempts, o.Model = ran, filepath.Base(a.Model)
		if i == 0 && len(a.Dropped) > 0 {
			// -i/-if without a terminal: they would wait on stdin for good.
			e.Event(heallog.Event{Event: heallog.Preflight, Tool: name, Reason: "flags that would wait on stdin with no terminal, dropped: " + strings.Join(a.Dropped, " "), Attempt: ran})
		}
		if i > 0 && len(a.Dropped) > 0 {
			e.Event(heallog.Event{Event: heallog.Fallback, Tool: a.Tool, Reason: "flags this attempt cannot pass on: " + strings.Join(a.Dropped, " "), Attempt: ran})
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
		bud, learned := e.learnedBudget(a)
		later := func() (time.Duration, string) {
			for _, next := range attempts[i+1:] {
				if next.Trigger.Follows(shims.AfterTimeout) && e.healthyNow(e.c.tool(next.Tool), next.Model) {
					return e.attemptBudget(next), withModel(next)
				}
			}
			return 0, ""
		}
		res, why := e.attempt(ctx, clock, name, ran, a, bud, live, healing != nil, later)
		if learned && res.Outcome == runner.TimedOut && res.Elapsed >= bud {
			e.unlearn(name, a, bud) // the learned budget, not what was left of the cap, ended it
		}
		if lostAnswer(a, res, live == nil) && bud-res.Elapsed > 0 && clock.left() > 0 && ctx.Err() == nil {
			// llama.cpp's async logger can lose the answer, or its end, at
			// exit (docs/llama-calls.md); a fresh run in what is left of
			// the budget usually answers whole.
			lines = append(lines, attemptLine(ran, a, why, res))
			e.Event(heallog.Event{Level: "warn", Event: heallog.Retry, Tool: name, Target: describe(a), Reason: why, Attempt: ran + 1})
			e.Say("%s: %s; trying it once more", a.Tool, why)
			ran++
			o.Attempts = ran
			res, why = e.attempt(ctx, clock, name, ran, a, bud-res.Elapsed, live, healing != nil, nil)
		}
		last = res
		if why == "" {
			if live == nil {
				_, _ = res.Stdout.WriteTo(o.W)
			}
			e.storeAnswer(pc, name, a, res)
			res.Stdout.Close()
			switch {
			case healing != nil && healing.stuck != "":
				e.Say("%s: answered by %s while %s (%s) %s", name, withModel(a), healing.rec.What, healing.rec.Where(), healing.stuck)
			case healing != nil:
				e.Say("%s: answered by %s while %s goes on in the background (%s); wait for it: %s",
					name, withModel(a), healing.rec.What, healing.rec.Where(), waitCommand(healing.rec))
			}
			if ran > 1 {
				e.Event(heallog.Event{Event: heallog.CallEnd, Tool: name, Result: "ok", Attempt: ran, Reason: "answered by " + describe(a)})
			}
			return 0
		}
		lines = append(lines, attemptLine(ran, a, why, res))
		if he := (*healingError)(nil); errors.As(res.Err, &he) && healing == nil {
			healing = he
		}
		if res.Outcome == runner.Interrupted {
			// The person or the harness asked to stop: no fallback. A tool
			// that ended by itself on the forwarded signal gives its own
			// status, and what it printed, as a direct call would.
			if res.Own && live == nil {
				_, _ = res.Stdout.WriteTo(o.W)
			}
			res.Stdout.Close()
			return res.Status()
		}
		switch res.Outcome {
		case runner.TimedOut, runner.Stalled:
			after = shims.AfterTimeout
		default:
			after = shims.AfterFailure
		}
	}
	e.Event(heallog.Event{Level: "error", Event: heallog.CallEnd, Tool: name, Result: "failed", Attempt: ran, Reason: strings.Join(lines, "; ")})
	if healing != nil {
		return e.fail(name, healing)
	}
	if len(attempts) == 1 {
		if last.Outcome == runner.Exited && last.Code == 0 {
			e.Say("%s: the tool exited 0 but printed nothing on stdout", name)
		}
		return last.Status()
	}
	e.Say("%s: every attempt failed:", name)
	for _, l := range lines {
		fmt.Fprintln(e.c.Stderr, "  "+l)
	}
	return 2
}

// lostAnswer reports whether res is llama-completion's answer lost to its
// logger at exit: exit 0 with nothing on stdout, or (when the answer was
// buffered, so that it can still be judged before it is printed) cut short.
func lostAnswer(a shims.Attempt, res runner.Result, buffered bool) bool {
	return a.Tool == shims.LlamaCompletion && res.Outcome == runner.Exited && res.Code == 0 &&
		(res.StdoutN == 0 || buffered && cutShort(a, res))
}

// cutShort reports whether a llama-completion answer lacks the blank line
// llama-completion writes last (its final LOG("\n\n"), before its
// timings): the logger lost the end of the answer, and an answer cut short
// must not pass for a whole one, nor be cached.
func cutShort(a shims.Attempt, res runner.Result) bool {
	return a.Tool == shims.LlamaCompletion && a.Model != "" && res.StdoutN > 0 && !res.Stdout.EndsWith("\n\n")
}

// withModel names an attempt for a person: "llama-simple with q3.gguf".
func withModel(a shims.Attempt) string {
	if a.Model == "" {
		return a.Tool
	}
	return a.Tool + " with " + filepath.Base(a.Model)
}

// attemptLine is an attempt's line in the report of a call whose every
// attempt failed.
func attemptLine(n int, a shims.Attempt, why string, res runner.Result) string {
	model := ""
	if a.Model != "" {
		model = " model " + filepath.Base(a.Model)
	}
	return fmt.Sprintf("attempt %d: %s%s: %s after %s", n, a.Tool, model, why, secs(res.Elapsed))
}

// attempt runs one planned attempt for at most bud and says why it failed
// ("" on success). A model or binary that cannot be healed is a failed
// start, a heal cut short by a signal an interrupted run, one the call's
// budget b ended a timeout.
//
// later, when set, is the planned budget of the first later attempt that
// is healthy now (0 for none) and its name: what a wait for this attempt's
// heal leaves.
func (e *Engine) attempt(ctx context.Context, clock *capClock, name string, n int, a shims.Attempt, bud time.Duration, live io.Writer, healthyOnly bool, later func() (time.Duration, string)) (runner.Result, string) {
	tool := e.c.tool(a.Tool)
	hctx, cancel := clock.ctx(ctx) // the attempt's heals: within what is left of the cap
	defer cancel()
	began := time.Now()
	notRun := func(err error, why string) (runner.Result, string) {
		err = clock.during(hctx, err)
		if sig, ok := interrupted(err); ok {
			e.Say("%s: %s", a.Tool, err)
			return runner.Result{Outcome: runner.Interrupted, Signal: sig, Err: err}, "interrupted"
		}
		switch ExitStatus(err) {
		case StatusHealing:
			// Said once, by runAttempts, when no other attempt answers.
			return runner.Result{Outcome: runner.TimedOut, Err: err, Elapsed: time.Since(began)}, "waited for a heal that goes on in the background"
		case runner.StatusTimeout:
			e.Say("%s: %s", a.Tool, err)
			return runner.Result{Outcome: runner.TimedOut, Err: err, Elapsed: time.Since(began)}, "timed out healing"
		}
		e.Say("%s: %s", a.Tool, err)
		return runner.Result{Outcome: runner.StartFailed, Err: fmt.Errorf("%w: %v", exec.ErrNotFound, err), Elapsed: time.Since(began)}, why
	}
	if healthyOnly && !e.healthyNow(tool, a.Model) {
		// A heal goes on in the background: only what is healthy now runs.
		return runner.Result{Outcome: runner.StartFailed, Err: exec.ErrNotFound}, "not healthy now, and not healed while another heal runs"
	}
	if a.Model != "" && n > 1 {
		if err := e.ensureModel(hctx, a.Tool, a.Model, false); err != nil && !e.stateFault(err) {
			return notRun(err, "model not available")
		}
	}
	h := e.checkTool(tool)
	leftFor := "" // the later attempt a wait leaves its time to: "python3's planned 2.0s"
	if !h.OK() && later != nil {
		// A heal to wait for: leave a later attempt that is healthy now
		// the time it is planned to take, so that it can still answer
		// while the heal goes on in the background.
		if reserve, next := later(); reserve > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithDeadline(hctx, clock.deadline.Add(-reserve))
			defer cancel()
			leftFor = next + "'s planned " + secs(reserve)
		}
	}
	real, err := e.healTool(hctx, tool, h, true)
	if he := (*healingError)(nil); errors.As(err, &he) && leftFor != "" {
		he.leftFor = leftFor
	}
	if err != nil {
		return notRun(err, "binary missing and not healed")
	}
	spec := e.spec(tool, real, append([]string{real}, a.Args...), e.childEnv(tool))
	spec.PTY = false // stdout must stay apart from the logs: it is the answer, checked and cached
	spec.Capture = true
	if live == nil {
		// The answer is printed only once it proved good: past a few MiB
		// it waits in a private temp file, not in memory.
		spec.SpillDir = e.c.StateDir
	}
	// The run's budget is the runner's own, which a stop (Ctrl-Z) does not
	// use, and so is the cap's share of it: clock moves on by the time the
	// tool spent stopped.
	spec.Budget = clock.runBudget(bud)
	spec.Stdout = live
	var tail *speed.Tail
	if isLlama(a.Tool) {
		tail = &speed.Tail{W: spec.Stderr} // llama.cpp's measured speed, read as it streams past
		spec.Stderr = tail
	}
	res := e.run(ctx, spec)
	clock.pause(res.Stopped)
	e.report(name, n, res, spec)
	why := verdict(a, res, spec.Budget, live == nil)
	if why != "" && !(res.Outcome == runner.Interrupted && res.Own) {
		res.Stdout.Close() // a failed attempt's output is never printed
	}
	if tail != nil && why == "" {
		if tps, ok := tail.Rate(); ok {
			e.learn(name, a, tps, res.Elapsed)
		}
	}
	return res, why
}

// verdict says why an attempt's run failed, "" when it answered; a
// buffered answer is judged whole or cut short before it is printed.
func verdict(a shims.Attempt, res runner.Result, bud time.Duration, buffered bool) string {
	switch {
	case isLlama(a.Tool) && res.Outcome == runner.Exited && res.Code == 0 && res.StdoutN == 0:
		return "exit 0 with nothing on stdout"
	case buffered && res.Outcome == runner.Exited && res.Code == 0 && cutShort(a, res):
		return "exit 0 with its answer cut short (no final blank line)"
	case res.Outcome == runner.Exited && res.Code == 0:
		return ""
	case res.Outcome == runner.Exited:
		return "exit " + strconv.Itoa(res.Code)
	case res.Outcome == runner.TimedOut:
		return "timeout (budget " + secs(bud) + ")"
	case res.Outcome == runner.Stalled:
		return "stalled"
	case res.Outcome == runner.PromptKilled:
		return "waited at a prompt " + strconv.Quote(res.Prompt)
	case res.Outcome == runner.Interrupted && res.Own:
		return "stopped by signal " + strconv.Itoa(int(res.Signal)) + ", exit " + strconv.Itoa(res.Code)
	case res.Outcome == runner.Signaled, res.Outcome == runner.Interrupted:
		return "killed by signal " + strconv.Itoa(int(res.Signal))
	}
	return res.Outcome.String()
}

// direct runs the tool with no plan: resolve, heal, run. With watch, the
// manifest's timeout (or GUARD_TIMEOUT), stall and prompt policy for the
// tool still apply, as for any other shimmed tool: a call guard cannot plan
// (a llama tool it has no plan for, arguments it cannot read) must still
// end. Without them, or for a person chatting, guard becomes the tool. A
// caller that needs the answer back gets exit 2 instead, since guard cannot
// read the call.
func (e *Engine) direct(ctx context.Context, tool *manifest.Tool, args []string, o *LlamaIO, watch bool) int {
	if o.NoDirect {
		e.Say("%s: cannot plan this call: %s", tool.Name, strings.Join(args, " "))
		return 2
	}
	return e.plain(ctx, tool, args, o.W, watch)
}

// isLlama reports whether name gets the llama policy: model heal, budgets,
// fallbacks and the prompt cache.
func isLlama(name string) bool { return name == shims.LlamaCompletion || name == shims.LlamaSimple }

func parseLlama(tool string, args []string) (shims.LlamaCall, error) {
	if tool == shims.LlamaSimple {
		return shims.ParseSimple(args)
	}
	return shims.ParseCompletion(args)
}

// modelInfo is the plan's view of the call's model and its timeout fallback.
func (e *Engine) modelInfo(path string) shims.ModelInfo {
	info := shims.ModelInfo{Path: path}
	m := e.c.M.ModelByFile(path)
	if path == "" || m == nil {
		return info
	}
	info.Base, info.TPS = m.Budget.Base.D(), m.Budget.TokensPerSecond
	if fb := e.c.M.FallbackModel(m); fb != nil && fb != m {
		// The fallback lives beside the call's model: the folder the agent
		// uses is the one that has room and survives.
		info.FallbackPath = filepath.Join(filepath.Dir(path), fb.File)
		info.FallbackBase, info.FallbackTPS = fb.Budget.Base.D(), fb.Budget.TokensPerSecond
	}
	return info
}

// hashRate is the rate a call counts on to hash a model it has not
// verified yet: a quarter of the 1 GiB/s one core hashes sha256 at on the
// machines measured (docs/BENCHMARKS.md), for a loaded machine.
const hashRate = 256 << 20 // bytes per second

// hashFits reports whether the model at path is here and whole and only
// waits for its first hash (pinned, no stamp yet: verify.Stale), and that
// hash at hashRate fits in what is left of ctx.
func (e *Engine) hashFits(ctx context.Context, path string) bool {
	m := e.c.M.ModelByFile(path)
	if m == nil || e.Models().Usable(m, path) != verify.Stale {
		return false
	}
	need := time.Duration(float64(m.Size) / hashRate * float64(time.Second))
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > need
}

// healthyNow reports whether tool's executable and, when model is set,
// that manifest model file can be used as they are: what a call may still
// run while a heal it needs goes on.
func (e *Engine) healthyNow(tool *manifest.Tool, model string) bool {
	if !e.ToolHealth(tool).OK() {
		return false
	}
	if model == "" {
		return true
	}
	if m := e.c.M.ModelByFile(model); m != nil {
		return e.Models().Usable(m, model).Healthy()
	}
	_, err := os.Stat(model)
	return err == nil
}
