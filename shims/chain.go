package shims

import "time"

// ToolStep is one tool of a fallback chain as the manifest has it.
type ToolStep struct {
	Name    string
	Forced  []string      // its forced flags (the manifest's args)
	Timeout time.Duration // its own per-call budget; 0 for none
}

// PlanFallbacks decides the attempts of a call to a tool with a fallback
// chain, for any tool but the llama ones (PlanLlama): steps[0] is the tool
// called, the others its fallbacks in order, each tried with the caller's
// arguments after the attempt before it ended badly in any way (AfterAny),
// with its own forced flags (Forced). An attempt's budget is its own
// timeout, else the called tool's, else the cap, never above the cap; an
// override (GUARD_TIMEOUT) replaces every budget. The cap over all
// attempts together is the caller's to enforce; a cap <= 0 means
// DefaultCap.
func PlanFallbacks(steps []ToolStep, args []string, override, cap time.Duration) []Attempt {
	if cap <= 0 {
		cap = DefaultCap
	}
	plan := make([]Attempt, 0, len(steps))
	for i, s := range steps {
		a := Attempt{Tool: s.Name, Args: Forced(s.Name, args, s.Forced, false), Trigger: AfterAny, N: -1}
		if i == 0 {
			a.Trigger = First
		}
		switch {
		case override > 0:
			a.Budget, a.Fixed = override, true
		case s.Timeout > 0:
			a.Budget = min(s.Timeout, cap)
		case steps[0].Timeout > 0:
			a.Budget = min(steps[0].Timeout, cap)
		default:
			a.Budget = cap
		}
		plan = append(plan, a)
	}
	return plan
}
