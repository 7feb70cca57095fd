package guard

import (
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/models/verify"
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
		return e.direct(ctx, tool, args, o)
	}
	if call.Interactive && stdinTTY && !o.NoDirect {
		if e.c.Debug {
			e.debug("%s: a person is chatting at a terminal: no plan", tool.Name)
		}
		return e.becomeTool(ctx, tool, args) // a person is chatting: no budget, no watchdog
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
			return e.direct(hctx, tool, args, o) // the tool reports the unreadable file itself
		}
		in.PromptFileText, in.PromptFileUnread = text, !read
		if !read {
			e.debug("%s: -f %s is not a regular file of at most %d bytes: left to the tool, uncached", tool.Name, call.PromptFile, maxPromptFile)
		}
	}
	attempts, err := shims.PlanLlama(in)
	if err != nil {
		return e.direct(hctx, tool, args, o)
	}
	e.debugPlan(tool.Name, attempts)
	var pc *promptCache
	if !in.PromptFileUnread {
		pc = e.promptCache(tool, in.PromptFileText)
	}
	loop := &attemptLoop{e: e, ctx: ctx, clock: clock, name: tool.Name, attempts: attempts, pc: pc, o: o, healing: healing}
	return loop.run()
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

// direct runs the tool with no plan: resolve, heal, run (plain). The
// manifest's timeout (or GUARD_TIMEOUT), stall and prompt policy for the
// tool still apply, as for any other shimmed tool: a call guard cannot plan
// (a llama tool it has no plan for, arguments it cannot read) must still
// end. Without them guard becomes the tool. A caller that needs the answer
// back gets exit 2 instead, since guard cannot read the call.
func (e *Engine) direct(ctx context.Context, tool *manifest.Tool, args []string, o *LlamaIO) int {
	if o.NoDirect {
		e.Say("%s: cannot plan this call: %s", tool.Name, strings.Join(args, " "))
		return 2
	}
	return e.plain(ctx, tool, args, o.W)
}

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
