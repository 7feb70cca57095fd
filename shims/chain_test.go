package shims_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/shims"
)

func TestPlanFallbacks(t *testing.T) {
	steps := []shims.ToolStep{
		{Name: "jq", Forced: fields("-M"), Timeout: 5 * sec},
		{Name: "python3"},
		{Name: "npx", Timeout: 500 * sec},
	}
	got := shims.PlanFallbacks(steps, fields(".a x.json"), 0, 60*sec)
	want := []shims.Attempt{
		{Tool: "jq", Args: fields("-M .a x.json"), Budget: 5 * sec, Trigger: shims.First, N: -1},
		// No timeout of its own: the called tool's.
		{Tool: "python3", Args: fields(".a x.json"), Budget: 5 * sec, Trigger: shims.AfterAny, N: -1},
		// Its own, within the cap; npx's forced --yes.
		{Tool: "npx", Args: fields("--yes .a x.json"), Budget: 60 * sec, Trigger: shims.AfterAny, N: -1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PlanFallbacks:\n got %+v\nwant %+v", got, want)
	}
	// GUARD_TIMEOUT is the person's choice for every attempt; no timeout
	// at all is the cap.
	got = shims.PlanFallbacks([]shims.ToolStep{{Name: "a"}, {Name: "b"}}, nil, 7*sec, 60*sec)
	if got[0].Budget != 7*sec || !got[0].Fixed || got[1].Budget != 7*sec {
		t.Errorf("override: %+v", got)
	}
	got = shims.PlanFallbacks([]shims.ToolStep{{Name: "a"}, {Name: "b"}}, nil, 0, 0)
	if got[0].Budget != shims.DefaultCap || got[1].Budget != shims.DefaultCap {
		t.Errorf("no timeout: %+v", got)
	}
}

func TestTriggerFollows(t *testing.T) {
	for _, tc := range []struct {
		t, how shims.Trigger
		want   bool
	}{
		{shims.AfterTimeout, shims.AfterTimeout, true},
		{shims.AfterTimeout, shims.AfterFailure, false},
		{shims.AfterFailure, shims.AfterFailure, true},
		{shims.AfterAny, shims.AfterTimeout, true},
		{shims.AfterAny, shims.AfterFailure, true},
		{shims.First, shims.AfterFailure, false},
	} {
		if got := tc.t.Follows(tc.how); got != tc.want {
			t.Errorf("%s.Follows(%s) = %v", tc.t, tc.how, got)
		}
	}
}

func TestBudgetAt(t *testing.T) {
	plan, err := shims.PlanLlama(shims.LlamaPlanInput{
		Tool: shims.LlamaCompletion, Args: fields("-m Qwen3.gguf -p hi -n 100"), Model: q3, Cap: 300 * sec,
	})
	if err != nil {
		t.Fatal(err)
	}
	a := plan[0] // 30 s + 100 tokens at 20/s
	for _, tc := range []struct {
		tps  float64
		cap  time.Duration
		want time.Duration
	}{
		{0, 300 * sec, 35 * sec},   // nothing measured: the plan's
		{4, 300 * sec, 55 * sec},   // slower than declared: longer
		{100, 300 * sec, 31 * sec}, // faster: shorter
		{0.1, 300 * sec, 300 * sec},
		{4, 40 * sec, 40 * sec},
	} {
		if got := a.BudgetAt(tc.tps, tc.cap); got != tc.want {
			t.Errorf("BudgetAt(%v, %v) = %v, want %v", tc.tps, tc.cap, got, tc.want)
		}
	}
	plan, _ = shims.PlanLlama(shims.LlamaPlanInput{
		Tool: shims.LlamaCompletion, Args: fields("-m Qwen3.gguf -p hi"), Model: q3, Cap: 300 * sec,
	})
	if got := plan[0].BudgetAt(100, 300*sec); got != 300*sec {
		t.Errorf("no -n: %v, want the cap", got)
	}
	plan, _ = shims.PlanLlama(shims.LlamaPlanInput{
		Tool: shims.LlamaCompletion, Args: fields("-m Qwen3.gguf -p hi -n 100"), Model: q3, Override: 9 * sec,
	})
	if got := plan[0].BudgetAt(100, 300*sec); got != 9*sec {
		t.Errorf("GUARD_TIMEOUT: %v, want it kept", got)
	}
}

// A -f file guard did not read (a pipe) cannot become llama-simple's
// prompt: no such attempt is planned.
func TestPlanLlamaPromptFileUnread(t *testing.T) {
	in := shims.LlamaPlanInput{
		Tool: shims.LlamaCompletion, Args: fields("-m Qwen3.gguf -f /dev/stdin"), Model: q3,
		FallbackTools: []string{shims.LlamaSimple}, PromptFileUnread: true,
	}
	plan, err := shims.PlanLlama(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range plan {
		if a.Tool == shims.LlamaSimple {
			t.Errorf("planned %+v with an unread prompt file", a)
		}
	}
}
