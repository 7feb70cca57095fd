package guard

import (
	"fmt"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/speed"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// Speeds is the store of the speeds each model generated at on this
// machine (docs/llama-calls.md). It is shared by every use.
func (e *Engine) Speeds() *speed.Store { return e.speeds() }

// attemptBudget is how long attempt a may run: its planned budget, made
// again from the speed measured on this machine once there is one (the
// manifest's rate is only the prior), within the cap. The call's budget
// still ends it sooner when less is left (the call's context). Only a
// manifest model has a budget to learn; a fixed one (GUARD_TIMEOUT) stays,
// and neither it nor an attempt without a model looks the manifest up.
func (e *Engine) attemptBudget(a shims.Attempt) time.Duration {
	d, _ := e.learnedBudget(a)
	return d
}

// learnedBudget is attemptBudget, and whether it was learned here. A
// learned budget never goes under its floor (speed.Learned: a fixed least
// and twice the longest of the last good runs), nor over the cap: a rate
// learned from fast runs must not end every later call at once
// (docs/llama-calls.md, "Budgets learned on this machine").
func (e *Engine) learnedBudget(a shims.Attempt) (time.Duration, bool) {
	d := a.Budget
	var m *manifest.Model
	if !a.Fixed && a.Model != "" {
		m = e.c.M.ModelByFile(a.Model)
	}
	if m != nil {
		if tps, floor, ok := e.Speeds().Learned(m.File); ok {
			limit := e.c.M.Budget.Cap.D()
			if limit <= 0 {
				limit = shims.DefaultCap
			}
			d = min(max(a.BudgetAt(tps, limit), floor), limit)
			if e.c.Debug {
				e.debug("%s: budget %s from %.1f tokens/s measured here, at least %s (declared %g: %s)", describe(a), secs(d), tps, secs(floor), m.Budget.TokensPerSecond, secs(a.Budget))
			}
			return d, true
		}
	}
	if e.c.Debug {
		e.debug("%s: budget %s", describe(a), secs(d))
	}
	return d, false
}

// unlearn forgets the speeds learned of a's model after a learned budget
// ended its run: what was learned no longer fits this machine (a busier
// one, a model file replaced by a slower one), and the next calls budget
// from the manifest's rate again while they measure anew.
func (e *Engine) unlearn(name string, a shims.Attempt, bud time.Duration) {
	m := e.c.M.ModelByFile(a.Model)
	if m == nil {
		return
	}
	if err := e.Speeds().Forget(m.File); err != nil {
		e.debug("%s: learned speeds not forgotten: %v", describe(a), err)
		return
	}
	e.Event(heallog.Event{Level: "warn", Event: heallog.BudgetLearned, Tool: name, Target: a.Model, Result: "ok",
		Reason: fmt.Sprintf("%s: a run ran past its learned budget of %s: budgets use the declared %g tokens/s again until %s are measured anew", m.File, secs(bud), m.Budget.TokensPerSecond, units.Count(speed.MinSamples, "run", "runs"))})
}

// learn records the speed a good attempt of a manifest model generated at
// and the time it took, and logs budget.learned when the rate budgets use
// moved by more than speed.News since it was last logged (the declared
// rate at first).
func (e *Engine) learn(name string, a shims.Attempt, tps float64, took time.Duration) {
	m := e.c.M.ModelByFile(a.Model)
	if m == nil {
		return
	}
	c, err := e.Speeds().Record(m.File, tps, took, m.Budget.TokensPerSecond)
	if err != nil {
		e.debug("%s: speed %.1f tokens/s not recorded: %v", describe(a), tps, err)
		return
	}
	if e.c.Debug {
		e.debug("%s: generated at %.1f tokens/s; budgets use %.1f", describe(a), tps, c.To)
	}
	if c.Learned {
		e.Event(heallog.Event{Event: heallog.BudgetLearned, Tool: name, Target: a.Model, Result: "ok",
			Reason: fmt.Sprintf("%s: budgets use %.1f tokens/s instead of %.1f (declared %g; the low percentile of the last calls here, halved)", m.File, c.To, c.From, m.Budget.TokensPerSecond)})
	}
}
