package guard

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/runner"
)

// GUARD_DEBUG=1 (or --verbose) says each decision of a call on stderr:
// the manifest, the resolution and checks, the plan and budgets, and exec
// or supervise.
func TestDebugSaysEachDecision(t *testing.T) {
	b := llamaBed(t, "GUARD_DEBUG=1")
	b.runs = []runner.Result{answer("x\n")}
	if got := b.e.call(context.Background(), "llama-completion", []string{"-m", b.model("fast.gguf"), "-p", "hi", "-n", "8"}); got != 0 {
		t.Fatalf("status %d", got)
	}
	b.tool("bin/jq")
	b.e.call(context.Background(), "jq", []string{"."})
	for _, want := range []string{
		"guard: debug: llama-completion: llama policy",
		"guard: debug: llama-completion: budget 60.0s ([budget] cap) for the whole call",
		"guard: debug: model " + b.model("fast.gguf") + ": unverified",
		"guard: debug: llama-completion: plan 1: llama-completion fast.gguf first, budget 12.0s: -m " + b.model("fast.gguf"),
		"guard: debug: llama-completion: plan 2: llama-completion q3.gguf after-timeout",
		"guard: debug: llama-completion fast.gguf: prompt cache hit: false",
		"guard: debug: llama-completion: resolved to " + b.dir + "/bin/llama-completion; binary ok",
		"guard: debug: jq: exec " + b.dir + "/bin/jq (nothing to watch)",
	} {
		if !strings.Contains(b.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, b.stderr.String())
		}
	}
	// Off by default: not a word.
	b = llamaBed(t)
	b.tool("bin/jq")
	b.e.call(context.Background(), "jq", []string{"."})
	if b.stderr.Len() != 0 {
		t.Errorf("stderr without GUARD_DEBUG: %q", b.stderr.String())
	}
}
