package guard

import (
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
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/guard/speed"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// attemptLoop runs the plan of a llama call or a fallback chain: the first
// attempt, then each later one whose trigger follows how the one before
// ended, all within the call's cap, clock. An attempt the prompt cache can
// answer is not run; llama-completion's empty answer is retried once
// before the plan moves on.
//
// A heal an attempt needs that goes on in the background past the call's
// budget (healing, when the call's model was found so before the plan)
// ends that attempt as a timeout does; the later attempts run only with
// what is healthy now, and when none answers the call ends with 75 and
// the heal's one line, not 2: time was the only problem.
//
// One loop is one call: build it with the plan and call run once.
type attemptLoop struct {
	e        *Engine
	ctx      context.Context
	clock    *capClock       // the call's cap
	name     string          // the tool the call was made to
	attempts []shims.Attempt // the plan
	pc       *promptCache    // nil: the call is not cached
	o        *LlamaIO
	healing  *healingError // a heal the call needs, going on in the background

	// What the loop found so far.
	ran   int           // attempts run, retries included
	after shims.Trigger // how the last attempt ended
	lines []string      // the verdict of each attempt that failed or was not run
	last  runner.Result // the last attempt's run
}

// run runs the plan and returns the call's exit status.
func (l *attemptLoop) run() int {
	l.after = shims.First
	for i, a := range l.attempts {
		if i > 0 && !a.Trigger.Follows(l.after) {
			continue
		}
		if i == 0 && l.healing != nil {
			l.lines = append(l.lines, fmt.Sprintf("%s: not run: %s goes on in the background", withModel(a), l.healing.rec.What))
			l.after = shims.AfterTimeout
			continue
		}
		if l.ctx.Err() != nil || l.clock.left() <= 0 {
			l.lines = append(l.lines, fmt.Sprintf("%s: not run: the call's budget of %s (%s) was used up", a.Tool, secs(l.clock.d), l.clock.source))
			break
		}
		if status, done := l.try(i, a); done {
			return status
		}
	}
	return l.failed()
}

// try answers the call with attempt i, a, from the prompt cache or by
// running it; done reports that the call ends here with status.
func (l *attemptLoop) try(i int, a shims.Attempt) (status int, done bool) {
	e := l.e
	if i > 0 {
		e.Event(heallog.Event{Level: "warn", Event: heallog.Fallback, Tool: l.name, Target: describe(a), Reason: l.after.String(), Attempt: l.ran + 1})
		if l.healing == nil {
			e.Say("%s: trying %s (%s)", l.name, withModel(a), l.after)
		}
	}
	if l.fromCache(i, a) {
		return 0, true
	}
	l.ran++
	l.o.Attempts, l.o.Model = l.ran, filepath.Base(a.Model)
	l.preflight(i, a)
	live := l.live()
	res, why := l.runOnce(i, a, live)
	l.last = res
	if why == "" {
		l.answered(a, res, live)
		return 0, true
	}
	return l.failedAttempt(a, res, why, live)
}

// fromCache answers the call with attempt i's cached answer, if any.
func (l *attemptLoop) fromCache(i int, a shims.Attempt) bool {
	entry, ok := l.cachedAnswer(a)
	if !ok {
		return false
	}
	l.o.W.Write(entry.Stdout)
	l.o.Cached, l.o.Model = true, filepath.Base(a.Model)
	if i > 0 {
		l.e.Event(heallog.Event{Event: heallog.CallEnd, Tool: l.name, Result: "ok", Attempt: l.ran + 1, Reason: "answered from the prompt cache for " + describe(a)})
	}
	return true
}

// preflight logs the flags attempt i cannot pass on.
func (l *attemptLoop) preflight(i int, a shims.Attempt) {
	if i == 0 && len(a.Dropped) > 0 {
		// -i/-if without a terminal: they would wait on stdin for good.
		l.e.Event(heallog.Event{Event: heallog.Preflight, Tool: l.name, Reason: "flags that would wait on stdin with no terminal, dropped: " + strings.Join(a.Dropped, " "), Attempt: l.ran})
	}
	if i > 0 && len(a.Dropped) > 0 {
		l.e.Event(heallog.Event{Event: heallog.Fallback, Tool: a.Tool, Reason: "flags this attempt cannot pass on: " + strings.Join(a.Dropped, " "), Attempt: l.ran})
	}
}

// live is where an attempt streams its answer as it prints it; nil: the
// answer waits until it proved good. A call with fallbacks prints only an
// answer that proved good, the last attempt's too: one that ends in exit 2
// leaves stdout empty, so a script never takes half an answer for one. A
// shim call with no fallback streams, as the tool would without guard; a
// swarm role never does, since its text is the answer or nothing.
func (l *attemptLoop) live() io.Writer {
	if len(l.attempts) == 1 && !l.o.NoDirect {
		return l.o.W
	}
	return nil
}

// runOnce runs attempt i, and once more when llama.cpp lost its answer.
func (l *attemptLoop) runOnce(i int, a shims.Attempt, live io.Writer) (runner.Result, string) {
	e := l.e
	bud, learned := e.learnedBudget(a)
	res, why := l.attempt(l.ran, a, bud, live, l.later(i))
	if learned && res.Outcome == runner.TimedOut && res.Elapsed >= bud {
		e.unlearn(l.name, a, bud) // the learned budget, not what was left of the cap, ended it
	}
	if lostAnswer(a, res, live == nil) && bud-res.Elapsed > 0 && l.clock.left() > 0 && l.ctx.Err() == nil {
		// llama.cpp's async logger can lose the answer, or its end, at
		// exit (docs/llama-calls.md); a fresh run in what is left of
		// the budget usually answers whole.
		l.lines = append(l.lines, attemptLine(l.ran, a, why, res))
		e.Event(heallog.Event{Level: "warn", Event: heallog.Retry, Tool: l.name, Target: describe(a), Reason: why, Attempt: l.ran + 1})
		e.Say("%s: %s; trying it once more", a.Tool, why)
		l.ran++
		l.o.Attempts = l.ran
		res, why = l.attempt(l.ran, a, bud-res.Elapsed, live, nil)
	}
	return res, why
}

// later is, for a wait on attempt i's heal, the planned budget of the
// first later attempt that is healthy now (0 for none) and its name.
func (l *attemptLoop) later(i int) func() (time.Duration, string) {
	return func() (time.Duration, string) {
		for _, next := range l.attempts[i+1:] {
			if next.Trigger.Follows(shims.AfterTimeout) && l.e.healthyNow(l.e.c.tool(next.Tool), next.Model) {
				return l.e.attemptBudget(next), withModel(next)
			}
		}
		return 0, ""
	}
}

// answered prints and caches attempt a's good answer, res.
func (l *attemptLoop) answered(a shims.Attempt, res runner.Result, live io.Writer) {
	e, healing := l.e, l.healing
	if live == nil {
		_, _ = res.Stdout.WriteTo(l.o.W)
	}
	l.storeAnswer(a, res)
	res.Stdout.Close()
	switch {
	case healing != nil && healing.stuck != "":
		e.Say("%s: answered by %s while %s (%s) %s", l.name, withModel(a), healing.rec.What, healing.rec.Where(), healing.stuck)
	case healing != nil:
		e.Say("%s: answered by %s while %s goes on in the background (%s); wait for it: %s",
			l.name, withModel(a), healing.rec.What, healing.rec.Where(), waitCommand(healing.rec))
	}
	if l.ran > 1 {
		l.e.Event(heallog.Event{Event: heallog.CallEnd, Tool: l.name, Result: "ok", Attempt: l.ran, Reason: "answered by " + describe(a)})
	}
}

// failedAttempt records why attempt a failed and how it ended, for the
// next one's trigger; done when it was interrupted: then no fallback runs.
func (l *attemptLoop) failedAttempt(a shims.Attempt, res runner.Result, why string, live io.Writer) (status int, done bool) {
	l.lines = append(l.lines, attemptLine(l.ran, a, why, res))
	if he := (*healingError)(nil); errors.As(res.Err, &he) && l.healing == nil {
		l.healing = he
	}
	if res.Outcome == runner.Interrupted {
		// The person or the harness asked to stop: no fallback. A tool
		// that ended by itself on the forwarded signal gives its own
		// status, and what it printed, as a direct call would.
		if res.Own && live == nil {
			_, _ = res.Stdout.WriteTo(l.o.W)
		}
		res.Stdout.Close()
		return res.Status(), true
	}
	switch res.Outcome {
	case runner.TimedOut, runner.Stalled:
		l.after = shims.AfterTimeout
	default:
		l.after = shims.AfterFailure
	}
	return 0, false
}

// failed ends a call no attempt answered.
func (l *attemptLoop) failed() int {
	e := l.e
	e.Event(heallog.Event{Level: "error", Event: heallog.CallEnd, Tool: l.name, Result: "failed", Attempt: l.ran, Reason: strings.Join(l.lines, "; ")})
	if l.healing != nil {
		return e.fail(l.name, l.healing)
	}
	if len(l.attempts) == 1 {
		if l.last.Outcome == runner.Exited && l.last.Code == 0 {
			e.Say("%s: the tool exited 0 but printed nothing on stdout", l.name)
		}
		return l.last.Status()
	}
	e.Say("%s: every attempt failed:", l.name)
	for _, line := range l.lines {
		fmt.Fprintln(e.c.Stderr, "  "+line)
	}
	return 2
}

// attempt runs one planned attempt, the call's nth run, for at most bud
// and says why it failed ("" on success). A model or binary that cannot be
// healed is a failed start, a heal cut short by a signal an interrupted
// run, one the call's budget ended a timeout.
//
// later, when set, is the planned budget of the first later attempt that
// is healthy now (0 for none) and its name: what a wait for this attempt's
// heal leaves.
func (l *attemptLoop) attempt(n int, a shims.Attempt, bud time.Duration, live io.Writer, later func() (time.Duration, string)) (runner.Result, string) {
	tool := l.e.c.tool(a.Tool)
	hctx, cancel := l.clock.ctx(l.ctx) // the attempt's heals: within what is left of the cap
	defer cancel()
	if l.healing != nil && !l.e.healthyNow(tool, a.Model) {
		// A heal goes on in the background: only what is healthy now runs.
		return runner.Result{Outcome: runner.StartFailed, Err: exec.ErrNotFound}, "not healthy now, and not healed while another heal runs"
	}
	real, res, why := l.heal(hctx, tool, n, a, later)
	if why != "" {
		return res, why
	}
	return l.runTool(tool, real, n, a, bud, live)
}

// heal brings back what attempt a, the call's nth run, needs: its model
// (the call's own was healed before the plan) and its executable. It
// returns the executable, or the run that was not made and why.
func (l *attemptLoop) heal(ctx context.Context, tool *manifest.Tool, n int, a shims.Attempt, later func() (time.Duration, string)) (string, runner.Result, string) {
	began := time.Now()
	if a.Model != "" && n > 1 {
		if err := l.e.ensureModel(ctx, a.Tool, a.Model, false); err != nil && !l.e.stateFault(err) {
			res, why := l.notRun(ctx, a, began, err, "model not available")
			return "", res, why
		}
	}
	h := l.e.checkTool(tool)
	ctx, leftFor, cancel := l.reserve(ctx, h, later)
	defer cancel()
	real, err := l.e.healTool(ctx, tool, h, healAsJob)
	if he := (*healingError)(nil); errors.As(err, &he) && leftFor != "" {
		he.leftFor = leftFor
	}
	if err != nil {
		res, why := l.notRun(ctx, a, began, err, "binary missing and not healed")
		return "", res, why
	}
	return real, runner.Result{}, ""
}

// reserve bounds the wait for a heal of the executable, h, so that it
// leaves a later attempt that is healthy now the time it is planned to
// take: it can still answer while the heal goes on in the background.
// leftFor names that attempt: "python3's planned 2.0s".
func (l *attemptLoop) reserve(ctx context.Context, h ToolHealth, later func() (time.Duration, string)) (_ context.Context, leftFor string, cancel context.CancelFunc) {
	if h.OK() || later == nil {
		return ctx, "", func() {}
	}
	reserve, next := later()
	if reserve <= 0 {
		return ctx, "", func() {}
	}
	ctx, cancel = context.WithDeadline(ctx, l.clock.deadline.Add(-reserve))
	return ctx, next + "'s planned " + secs(reserve), cancel
}

// notRun is the run of attempt a that a heal, failed with err, did not
// let start, and why; ctx is the heal's.
func (l *attemptLoop) notRun(ctx context.Context, a shims.Attempt, began time.Time, err error, why string) (runner.Result, string) {
	e := l.e
	err = l.clock.during(ctx, err)
	if sig, ok := interrupted(err); ok {
		e.Say("%s: %s", a.Tool, err)
		return runner.Result{Outcome: runner.Interrupted, Signal: sig, Err: err}, "interrupted"
	}
	switch ExitStatus(err) {
	case StatusHealing:
		// Said once, by the loop, when no other attempt answers.
		return runner.Result{Outcome: runner.TimedOut, Err: err, Elapsed: time.Since(began)}, "waited for a heal that goes on in the background"
	case runner.StatusTimeout:
		e.Say("%s: %s", a.Tool, err)
		return runner.Result{Outcome: runner.TimedOut, Err: err, Elapsed: time.Since(began)}, "timed out healing"
	}
	e.Say("%s: %s", a.Tool, err)
	return runner.Result{Outcome: runner.StartFailed, Err: fmt.Errorf("%w: %v", exec.ErrNotFound, err), Elapsed: time.Since(began)}, why
}

// runTool runs attempt a, the call's nth run, with the healthy executable
// real, supervised, and judges its run (verdict).
func (l *attemptLoop) runTool(tool *manifest.Tool, real string, n int, a shims.Attempt, bud time.Duration, live io.Writer) (runner.Result, string) {
	e := l.e
	spec := l.spec(tool, real, a, bud, live)
	var tail *speed.Tail
	if isLlama(a.Tool) {
		tail = &speed.Tail{W: spec.Stderr} // llama.cpp's measured speed, read as it streams past
		spec.Stderr = tail
	}
	res := e.run(l.ctx, spec)
	l.clock.pause(res.Stopped)
	e.report(l.name, n, res, spec)
	why := verdict(a, res, spec.Budget, live == nil)
	if why != "" && !(res.Outcome == runner.Interrupted && res.Own) {
		res.Stdout.Close() // a failed attempt's output is never printed
	}
	if tail != nil && why == "" {
		if tps, ok := tail.Rate(); ok {
			e.learn(l.name, a, tps, res.Elapsed)
		}
	}
	return res, why
}

// spec is attempt a's supervised run of real, for at most bud.
func (l *attemptLoop) spec(tool *manifest.Tool, real string, a shims.Attempt, bud time.Duration, live io.Writer) runner.Spec {
	spec := l.e.spec(tool, real, append([]string{real}, a.Args...), l.e.childEnv(tool))
	spec.PTY = false // stdout must stay apart from the logs: it is the answer, checked and cached
	spec.Capture = true
	if live == nil {
		// The answer is printed only once it proved good: past a few MiB
		// it waits in a private temp file, not in memory.
		spec.SpillDir = l.e.c.StateDir
	}
	// The run's budget is the runner's own, which a stop (Ctrl-Z) does not
	// use, and so is the cap's share of it: clock moves on by the time the
	// tool spent stopped.
	spec.Budget = l.clock.runBudget(bud)
	spec.Stdout = live
	return spec
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

// attemptLine is an attempt's line in the report of a call whose every
// attempt failed.
func attemptLine(n int, a shims.Attempt, why string, res runner.Result) string {
	model := ""
	if a.Model != "" {
		model = " model " + filepath.Base(a.Model)
	}
	return fmt.Sprintf("attempt %d: %s%s: %s after %s", n, a.Tool, model, why, secs(res.Elapsed))
}

// withModel names an attempt for a person: "llama-simple with q3.gguf".
func withModel(a shims.Attempt) string {
	if a.Model == "" {
		return a.Tool
	}
	return a.Tool + " with " + filepath.Base(a.Model)
}

// isLlama reports whether name gets the llama policy: model heal, budgets,
// fallbacks and the prompt cache.
func isLlama(name string) bool { return name == shims.LlamaCompletion || name == shims.LlamaSimple }

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
