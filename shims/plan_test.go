package shims_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/shims"
)

const sec = time.Second

// q3 is the default manifest's small model with a timeout fallback.
var q3 = shims.ModelInfo{
	Path: "/m/Qwen3.gguf", Base: 30 * sec, TPS: 20,
	FallbackPath: "/m/Qwen2.5.gguf", FallbackBase: 30 * sec, FallbackTPS: 20,
}

func TestPlanLlamaCompletion(t *testing.T) {
	in := shims.LlamaPlanInput{
		Tool:          shims.LlamaCompletion,
		Args:          fields("-m Qwen3.gguf -p 'why is the sky blue' -n 100"),
		Defaults:      fields("-t 1"),
		Model:         q3,
		Cap:           300 * sec,
		FallbackTools: []string{shims.LlamaSimple},
	}
	got, err := shims.PlanLlama(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []shims.Attempt{
		{
			Tool:    shims.LlamaCompletion,
			Args:    fields("-m /m/Qwen3.gguf -p 'why is the sky blue' -n 100 -t 1 -no-cnv"),
			Model:   "/m/Qwen3.gguf",
			Budget:  35 * sec,
			Trigger: shims.First,
			Base:    30 * sec,
			N:       100,
		},
		{
			Tool:    shims.LlamaCompletion,
			Args:    fields("-m /m/Qwen2.5.gguf -p 'why is the sky blue' -n 100 -t 1 -no-cnv"),
			Model:   "/m/Qwen2.5.gguf",
			Budget:  35 * sec,
			Trigger: shims.AfterTimeout,
			Base:    30 * sec,
			N:       100,
		},
		{
			Tool:    shims.LlamaSimple,
			Args:    []string{"-m", "/m/Qwen3.gguf", "-n", "100", "why is the sky blue"},
			Model:   "/m/Qwen3.gguf",
			Budget:  35 * sec,
			Trigger: shims.AfterFailure,
			Dropped: []string{"-t 1"},
			Base:    30 * sec,
			N:       100,
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PlanLlama:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(in.Args, fields("-m Qwen3.gguf -p 'why is the sky blue' -n 100")) {
		t.Errorf("PlanLlama changed its input: %q", in.Args)
	}
}

func TestPlanLlamaShapes(t *testing.T) {
	base := shims.LlamaPlanInput{
		Tool:  shims.LlamaCompletion,
		Args:  fields("-m a.gguf -p hi"),
		Model: q3,
		Cap:   300 * sec,
	}
	tests := []struct {
		name     string
		edit     func(*shims.LlamaPlanInput)
		triggers []shims.Trigger
		tools    []string
		budgets  []time.Duration
	}{
		{
			name:     "timeout fallback only",
			edit:     func(in *shims.LlamaPlanInput) {},
			triggers: []shims.Trigger{shims.First, shims.AfterTimeout},
			tools:    []string{shims.LlamaCompletion, shims.LlamaCompletion},
			budgets:  []time.Duration{300 * sec, 300 * sec}, // no -n: unlimited
		},
		{
			name:     "no fallback model",
			edit:     func(in *shims.LlamaPlanInput) { in.Model.FallbackPath = "" },
			triggers: []shims.Trigger{shims.First},
			tools:    []string{shims.LlamaCompletion},
			budgets:  []time.Duration{300 * sec},
		},
		{
			name:     "fallback model is the same model",
			edit:     func(in *shims.LlamaPlanInput) { in.Model.FallbackPath = in.Model.Path },
			triggers: []shims.Trigger{shims.First},
			tools:    []string{shims.LlamaCompletion},
			budgets:  []time.Duration{300 * sec},
		},
		{
			name: "simple fallback, listed twice, others ignored",
			edit: func(in *shims.LlamaPlanInput) {
				in.Model.FallbackPath = ""
				in.FallbackTools = []string{"llama-cli", shims.LlamaSimple, shims.LlamaSimple}
			},
			triggers: []shims.Trigger{shims.First, shims.AfterFailure},
			tools:    []string{shims.LlamaCompletion, shims.LlamaSimple},
			budgets:  []time.Duration{300 * sec, 31600 * time.Millisecond}, // simple's default 32 tokens
		},
		{
			name: "override replaces every budget",
			edit: func(in *shims.LlamaPlanInput) {
				in.Override = 7 * sec
				in.FallbackTools = []string{shims.LlamaSimple}
			},
			triggers: []shims.Trigger{shims.First, shims.AfterTimeout, shims.AfterFailure},
			tools:    []string{shims.LlamaCompletion, shims.LlamaCompletion, shims.LlamaSimple},
			budgets:  []time.Duration{7 * sec, 7 * sec, 7 * sec},
		},
		{
			name: "budgets from each model",
			edit: func(in *shims.LlamaPlanInput) {
				in.Args = fields("-m a.gguf -p hi -n 50")
				in.Model.FallbackBase, in.Model.FallbackTPS = 45*sec, 10
				in.Cap = 60 * sec
			},
			triggers: []shims.Trigger{shims.First, shims.AfterTimeout},
			tools:    []string{shims.LlamaCompletion, shims.LlamaCompletion},
			budgets:  []time.Duration{32500 * time.Millisecond, 50 * sec},
		},
		{
			name: "prompt llama-simple cannot take: no simple attempt",
			edit: func(in *shims.LlamaPlanInput) {
				in.Args = fields("-m a -p -n")
				in.Model.FallbackPath = ""
				in.FallbackTools = []string{shims.LlamaSimple}
			},
			triggers: []shims.Trigger{shims.First},
			tools:    []string{shims.LlamaCompletion},
			budgets:  []time.Duration{300 * sec},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			in.Args = append([]string(nil), base.Args...)
			tt.edit(&in)
			plan, err := shims.PlanLlama(in)
			if err != nil {
				t.Fatal(err)
			}
			var triggers []shims.Trigger
			var tools []string
			var budgets []time.Duration
			for _, a := range plan {
				triggers = append(triggers, a.Trigger)
				tools = append(tools, a.Tool)
				budgets = append(budgets, a.Budget)
			}
			if !reflect.DeepEqual(triggers, tt.triggers) || !reflect.DeepEqual(tools, tt.tools) || !reflect.DeepEqual(budgets, tt.budgets) {
				t.Errorf("plan %v %v %v, want %v %v %v", triggers, tools, budgets, tt.triggers, tt.tools, tt.budgets)
			}
		})
	}
}

func TestPlanLlamaInteractive(t *testing.T) {
	in := shims.LlamaPlanInput{
		Tool:  shims.LlamaCompletion,
		Args:  fields("-m a -cnv -i"),
		Model: shims.ModelInfo{Path: "/m/a.gguf", Base: sec, TPS: 1},
	}
	plan, err := shims.PlanLlama(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := fields("-m /m/a.gguf -cnv -no-cnv"); !reflect.DeepEqual(plan[0].Args, want) {
		t.Errorf("no tty: args %q, want %q", plan[0].Args, want)
	}
	if want := []string{"-i"}; !reflect.DeepEqual(plan[0].Dropped, want) {
		t.Errorf("no tty: dropped %q, want %q", plan[0].Dropped, want)
	}
	in.StdinTTY = true
	plan, _ = shims.PlanLlama(in)
	if want := fields("-m /m/a.gguf -cnv -i"); !reflect.DeepEqual(plan[0].Args, want) {
		t.Errorf("tty: args %q, want %q", plan[0].Args, want)
	}
}

func TestPlanLlamaSimple(t *testing.T) {
	in := shims.LlamaPlanInput{
		Tool:          shims.LlamaSimple,
		Args:          fields("-m a.gguf -n 40 -t 4 hi"),
		Defaults:      fields("-t 1"),
		Model:         q3,
		FallbackTools: []string{shims.LlamaSimple, shims.LlamaCompletion},
	}
	plan, err := shims.PlanLlama(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []shims.Attempt{
		{Tool: shims.LlamaSimple, Args: fields("-m /m/Qwen3.gguf -n 40 -t 4 hi"), Model: "/m/Qwen3.gguf", Budget: 32 * sec, Trigger: shims.First, Base: 30 * sec, N: 40},
		{Tool: shims.LlamaSimple, Args: fields("-m /m/Qwen2.5.gguf -n 40 -t 4 hi"), Model: "/m/Qwen2.5.gguf", Budget: 32 * sec, Trigger: shims.AfterTimeout, Base: 30 * sec, N: 40},
	}
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("PlanLlama:\n got %+v\nwant %+v", plan, want)
	}
}

func TestPlanLlamaNoManifestModel(t *testing.T) {
	plan, err := shims.PlanLlama(shims.LlamaPlanInput{Tool: shims.LlamaCompletion, Args: fields("-m own.gguf -n 5")})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || plan[0].Model != "own.gguf" || plan[0].Budget != shims.DefaultCap ||
		!reflect.DeepEqual(plan[0].Args, fields("-m own.gguf -n 5 -no-cnv")) {
		t.Errorf("plan %+v", plan)
	}
}

func TestPlanLlamaErrors(t *testing.T) {
	for _, in := range []shims.LlamaPlanInput{
		{Tool: "npx", Args: fields("cowsay")},
		{Tool: "", Args: nil},
		{Tool: shims.LlamaCompletion, Args: fields("-m")},
		{Tool: shims.LlamaCompletion, Args: fields("-n many")},
		{Tool: shims.LlamaSimple, Args: fields("-m a -n")},
	} {
		if plan, err := shims.PlanLlama(in); err == nil {
			t.Errorf("PlanLlama(%s %q) = %+v, want an error", in.Tool, in.Args, plan)
		}
	}
}

func TestTriggerString(t *testing.T) {
	for tr, want := range map[shims.Trigger]string{
		shims.First:        "first",
		shims.AfterTimeout: "after-timeout",
		shims.AfterFailure: "after-failure",
		shims.AfterAny:     "after-any",
		shims.Trigger(9):   "trigger(9)",
	} {
		if got := tr.String(); got != want {
			t.Errorf("Trigger(%d).String() = %q, want %q", int(tr), got, want)
		}
	}
}
