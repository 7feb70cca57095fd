package shims

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Tool names the llama plans know.
const (
	LlamaCompletion = "llama-completion"
	LlamaSimple     = "llama-simple"
)

// simpleDefaultN is llama-simple's own -n when none is given.
const simpleDefaultN = 32

// Trigger says when an attempt runs. The first attempt always runs; after an
// attempt ends badly, the runner moves on to the next later attempt whose
// trigger matches how it ended, and stops when there is none.
type Trigger int

const (
	// First is the call itself.
	First Trigger = iota
	// AfterTimeout runs when the attempt before ran out of budget or stalled.
	AfterTimeout
	// AfterFailure runs when the attempt before exited non-zero, died of a
	// signal, could not start (missing binary), or exited 0 with nothing on
	// stdout (llama-completion does that with stdout a pipe).
	AfterFailure
	// AfterAny runs when the attempt before ended badly in any way: a
	// fallback tool of a chain (PlanFallbacks).
	AfterAny
)

// Follows reports whether an attempt with trigger t runs after an attempt
// that ended as how (AfterTimeout or AfterFailure).
func (t Trigger) Follows(how Trigger) bool { return t == how || t == AfterAny }

// String returns the name used in logs and messages.
func (t Trigger) String() string {
	switch t {
	case First:
		return "first"
	case AfterTimeout:
		return "after-timeout"
	case AfterFailure:
		return "after-failure"
	case AfterAny:
		return "after-any"
	}
	return "trigger(" + strconv.Itoa(int(t)) + ")"
}

// Attempt is one run a call may make.
type Attempt struct {
	Tool    string        // shim name of the tool to run
	Args    []string      // its arguments, without argv[0]
	Model   string        // model file it loads ("" if unknown)
	Budget  time.Duration // how long it may run
	Trigger Trigger
	Dropped []string // caller flags this attempt cannot pass on, for the log

	// What a llama attempt's Budget was made of, so that the caller can
	// make it again from a rate measured on this machine (BudgetAt): the
	// model's base time and the tokens asked for (-1 for none).
	Base time.Duration
	N    int
	// Fixed says Budget is the person's explicit choice (GUARD_TIMEOUT, a
	// swarm role's budget) and no measured rate replaces it.
	Fixed bool
}

// BudgetAt is a's budget at tokensPerSecond instead of the rate it was
// planned with, within cap (see Budget). A fixed budget, or a rate that is
// not a positive number, leaves Budget as it is.
func (a Attempt) BudgetAt(tokensPerSecond float64, cap time.Duration) time.Duration {
	if a.Fixed || !(tokensPerSecond > 0) || a.Model == "" {
		return a.Budget
	}
	return Budget(a.Base, tokensPerSecond, a.N, cap)
}

// ModelInfo is what the manifest says about the call's model and its
// timeout fallback. FallbackPath "" means there is none.
type ModelInfo struct {
	Path         string
	Base         time.Duration
	TPS          float64
	FallbackPath string
	FallbackBase time.Duration
	FallbackTPS  float64
}

// LlamaPlanInput is everything PlanLlama decides from.
type LlamaPlanInput struct {
	Tool           string   // llama-completion or llama-simple
	Args           []string // the caller's arguments, without argv[0]
	StdinTTY       bool     // a person is at the terminal
	Defaults       []string // manifest defaults for llama-completion, e.g. -t 1
	Model          ModelInfo
	Cap            time.Duration // per-attempt cap; <= 0 means DefaultCap
	Override       time.Duration // GUARD_TIMEOUT, 0 = none
	FallbackTools  []string      // manifest fallback list
	PromptFileText string        // text of the -f file, read by the caller
	// PromptFileUnread says the -f file was not read (a pipe, a device, a
	// file past the caller's cap): the tool reads it itself, and no
	// llama-simple attempt is planned, since it needs the text.
	PromptFileUnread bool
}

// PlanLlama decides, up front and without I/O, the attempts a llama call may
// make, in order:
//
//  1. First: the call as given, with the model path from Model.Path (when
//     set), and for llama-completion the manifest defaults the caller did not
//     set plus nonInteractive's -no-cnv. llama-simple gets neither: it has no
//     conversation mode and would read any flag but -m/-n/-ngl as prompt
//     text. Budget from the model.
//  2. AfterTimeout, when Model.FallbackPath is set and differs from the
//     first model: the same call with the fallback model; budget from that
//     model. Making sure the file is there is the caller's job.
//  3. AfterFailure, for llama-completion when FallbackTools names
//     llama-simple: llama-simple with ToSimple's translation of attempt 1's
//     arguments (defaults included, -no-cnv not) and the first model; what
//     it cannot pass on is in Dropped. Other FallbackTools entries are
//     ignored, and so is this attempt when the prompt cannot be passed to
//     llama-simple (see ToSimple) or the -f file was not read, since it
//     could never run as the caller meant.
//
// Budgets come from Budget with the call's -n (llama-simple's default of 32
// when it has none) and Cap; Override, when > 0, replaces every budget
// as-is, because it is the user's explicit choice. The cap over all attempts
// together is the caller's to enforce. Arguments the tool itself would
// refuse (a flag missing its value, a non-numeric -n) are an error, and so
// is a tool that is not a llama tool.
func PlanLlama(in LlamaPlanInput) ([]Attempt, error) {
	switch in.Tool {
	case LlamaCompletion:
		return planCompletion(in)
	case LlamaSimple:
		return planSimple(in)
	}
	return nil, fmt.Errorf("plan %q: not a llama tool", in.Tool)
}

func planCompletion(in LlamaPlanInput) ([]Attempt, error) {
	call, err := ParseCompletion(in.Args)
	if err != nil {
		return nil, fmt.Errorf("parse %s arguments: %w", LlamaCompletion, err)
	}
	prepare := func(model string) (args, dropped []string) {
		args = in.Args
		if model != "" {
			args = WithModel(args, model)
		}
		return nonInteractive(AddDefaults(args, in.Defaults), call, in.StdinTTY)
	}
	first := model(in.Model.Path, call.Model)
	args, dropped := prepare(in.Model.Path)
	n := tokens(call.N, call.NSet)
	plan := []Attempt{in.attempt(Attempt{
		Tool:    LlamaCompletion,
		Args:    args,
		Model:   first,
		Trigger: First,
		Dropped: dropped,
	}, in.Model.Base, in.Model.TPS, n)}
	if fb := in.Model.FallbackPath; fb != "" && fb != first {
		args, dropped := prepare(fb)
		plan = append(plan, in.attempt(Attempt{
			Tool:    LlamaCompletion,
			Args:    args,
			Model:   fb,
			Trigger: AfterTimeout,
			Dropped: dropped,
		}, in.Model.FallbackBase, in.Model.FallbackTPS, n))
	}
	if !slices.Contains(in.FallbackTools, LlamaSimple) || in.PromptFileUnread {
		return plan, nil
	}
	withDefaults := in.Args
	if in.Model.Path != "" {
		withDefaults = WithModel(withDefaults, in.Model.Path)
	}
	simpleArgs, dropped, err := ToSimple(AddDefaults(withDefaults, in.Defaults), in.PromptFileText)
	if err != nil {
		return plan, nil // documented: a prompt llama-simple cannot take
	}
	return append(plan, in.attempt(Attempt{
		Tool:    LlamaSimple,
		Args:    simpleArgs,
		Model:   first,
		Trigger: AfterFailure,
		Dropped: dropped,
	}, in.Model.Base, in.Model.TPS, simpleN(simpleArgs))), nil
}

func planSimple(in LlamaPlanInput) ([]Attempt, error) {
	call, err := ParseSimple(in.Args)
	if err != nil {
		return nil, fmt.Errorf("parse %s arguments: %w", LlamaSimple, err)
	}
	n := simpleDefaultN
	if call.NSet {
		n = max(call.N, -1)
	}
	withModel := func(model string) []string {
		if model == "" {
			return append([]string(nil), in.Args...)
		}
		return WithModelSimple(in.Args, model)
	}
	first := model(in.Model.Path, call.Model)
	plan := []Attempt{in.attempt(Attempt{
		Tool:    LlamaSimple,
		Args:    withModel(in.Model.Path),
		Model:   first,
		Trigger: First,
	}, in.Model.Base, in.Model.TPS, n)}
	if fb := in.Model.FallbackPath; fb != "" && fb != first {
		plan = append(plan, in.attempt(Attempt{
			Tool:    LlamaSimple,
			Args:    withModel(fb),
			Model:   fb,
			Trigger: AfterTimeout,
		}, in.Model.FallbackBase, in.Model.FallbackTPS, n))
	}
	return plan, nil
}

// attempt gives a its budget from the model's base and rate for n tokens
// (-1: as many as it likes) within the input's cap, or the override when
// there is one, and keeps what the budget was made of.
func (in LlamaPlanInput) attempt(a Attempt, base time.Duration, tps float64, n int) Attempt {
	a.Base, a.N = base, n
	if in.Override > 0 {
		a.Budget, a.Fixed = in.Override, true
		return a
	}
	a.Budget = Budget(base, tps, n, in.Cap)
	return a
}

// tokens is -n as a count, -1 when it is absent or not a count (unlimited).
func tokens(n int, set bool) int {
	if !set || n < 0 {
		return -1
	}
	return n
}

// simpleN returns the -n llama-simple will use for args ToSimple built.
func simpleN(args []string) int {
	call, err := ParseSimple(args)
	if err != nil || !call.NSet {
		return simpleDefaultN
	}
	return max(call.N, -1)
}

// model prefers the manifest's resolved path over the one in the arguments.
func model(resolved, fromArgs string) string {
	if resolved != "" {
		return resolved
	}
	return fromArgs
}
