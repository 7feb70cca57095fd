package guard

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/runner"
)

// llamaManifest has two tools, two models (q3 the timeout fallback of
// fast) and a mirror folder the models are downloaded from.
const llamaManifest = `
models_dir = "$DIR/models"

[tools.llama-completion]
path = "$DIR/bin/llama-completion"
fallback = ["llama-simple"]
stall = "45s"

[tools.llama-simple]
path = "$DIR/bin/llama-simple"

[budget]
cap = "60s"

[[models]]
file = "fast.gguf"
size = 64
urls = ["file://$DIR/mirror/fast.gguf"]
role = "fast"
budget = { base = "10s", tokens_per_second = 4 }
fallback = "q3"

[[models]]
file = "q3.gguf"
size = 96
urls = ["file://$DIR/mirror/q3.gguf"]
role = "q3"
budget = { base = "20s", tokens_per_second = 8 }
`

// llamaBed is a bed with both llama tools present and both models on the
// mirror; fast.gguf is also in the models folder already.
func llamaBed(t *testing.T, env ...string) *testBed {
	t.Helper()
	b := newBed(t, llamaManifest, env...)
	b.tool("bin/llama-completion")
	b.tool("bin/llama-simple")
	guardtest.WriteGGUF(t, filepath.Join(b.dir, "mirror/fast.gguf"), 64)
	guardtest.WriteGGUF(t, filepath.Join(b.dir, "mirror/q3.gguf"), 96)
	guardtest.WriteGGUF(t, filepath.Join(b.dir, "models/fast.gguf"), 64)
	return b
}

func (b *testBed) model(name string) string { return filepath.Join(b.dir, "models", name) }

// answer is a run that printed text as llama-completion prints an answer:
// followed by the blank line it writes last.
func answer(text string) runner.Result {
	text += "\n"
	return runner.Result{Outcome: runner.Exited, Stdout: runner.NewOutput([]byte(text)), StdoutN: int64(len(text)), Elapsed: time.Second}
}

func TestLlamaAnswersAndCachesTheAnswer(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{answer("four\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "2+2?", "-n", "8"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if b.stdout.String() != "four\n\n" {
		t.Errorf("stdout %q", b.stdout.String())
	}
	s := b.specs[0]
	if !slices.Contains(s.Argv, "-no-cnv") || !s.Capture || s.PTY || s.Stdout != nil {
		t.Errorf("first attempt of a call with fallbacks: %+v", s)
	}
	if s.Budget != 12*time.Second { // 10 s + 8 tokens at 4/s
		t.Errorf("budget %v", s.Budget)
	}
	b.event("cache.store")

	b.stdout.Reset()
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 || b.stdout.String() != "four\n\n" {
		t.Fatalf("repeat: status %d, stdout %q", got, b.stdout.String())
	}
	if len(b.specs) != 1 {
		t.Errorf("the repeat ran the tool again")
	}
}

func TestLlamaCacheOff(t *testing.T) {
	b := llamaBed(t, "GUARD_CACHE=off")
	b.runs = []runner.Result{answer("a\n"), answer("b\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hi"}
	b.e.call(context.Background(), "llama-completion", args)
	b.e.call(context.Background(), "llama-completion", args)
	if len(b.specs) != 2 || b.stdout.String() != "a\n\nb\n\n" {
		t.Errorf("%d runs, stdout %q", len(b.specs), b.stdout.String())
	}
}

func TestLlamaFailureFallsBackToSimple(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{{Outcome: runner.Exited, Code: 1, StdoutN: 5, Stdout: runner.NewOutput([]byte("half "))}, answer("whole\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hello", "-t", "2", "-n", "4"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if b.stdout.String() != "whole\n\n" {
		t.Errorf("stdout %q: a failed attempt's output leaked", b.stdout.String())
	}
	second := b.specs[1]
	if second.Path != filepath.Join(b.dir, "bin/llama-simple") || second.Argv[len(second.Argv)-1] != "hello" {
		t.Errorf("fallback %q %q", second.Path, second.Argv)
	}
	if !strings.Contains(b.stderr.String(), "guard: llama-completion: trying llama-simple with fast.gguf (after-failure)") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	evs := b.events()
	names := []string{}
	for _, ev := range evs {
		names = append(names, ev["event"].(string))
	}
	for _, want := range []string{"fallback", "call.end"} {
		if !slices.Contains(names, want) {
			t.Errorf("events %v lack %s", names, want)
		}
	}
}

func TestLlamaTimeoutFallsBackToTheFallbackModel(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{{Outcome: runner.TimedOut, Elapsed: 11 * time.Second}, answer("q3 says hi\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hello", "-n", "4"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	second := b.specs[1]
	if !slices.Contains(second.Argv, b.model("q3.gguf")) || second.Budget != 20500*time.Millisecond {
		t.Errorf("fallback attempt %q, budget %v", second.Argv, second.Budget)
	}
	if data, err := os.ReadFile(b.model("q3.gguf")); err != nil || len(data) != 96 {
		t.Errorf("the fallback model was not healed: %d bytes, %v", len(data), err)
	}
}

func TestLlamaEveryAttemptFailedIsExit2(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{{Outcome: runner.Exited, Code: 1}, {Outcome: runner.Exited}}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hello"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 2 {
		t.Fatalf("status %d", got)
	}
	for _, want := range []string{
		"guard: llama-completion: every attempt failed:\n",
		"  attempt 1: llama-completion model fast.gguf: exit 1 after 0.0s\n",
		"  attempt 2: llama-simple model fast.gguf: exit 0 with nothing on stdout after 0.0s\n",
	} {
		if !strings.Contains(b.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, b.stderr.String())
		}
	}
	if ev := b.event("call.end"); ev["result"] != "failed" {
		t.Errorf("call.end %v", ev)
	}
}

func TestLlamaSingleAttemptStreamsAndSaysWhenEmpty(t *testing.T) {
	b := llamaBed(t)
	guardtest.WriteGGUF(t, b.model("q3.gguf"), 96)
	b.runs = []runner.Result{{Outcome: runner.Exited}}
	args := []string{"-m", b.model("q3.gguf"), "hello"} // q3 has no timeout fallback
	if got := b.e.call(context.Background(), "llama-simple", args); got != 0 {
		t.Fatalf("status %d", got)
	}
	if b.specs[0].Stdout != b.e.c.Stdout {
		t.Error("a call with no fallback does not stream")
	}
	if !strings.Contains(b.stderr.String(), "guard: llama-simple: the tool exited 0 but printed nothing on stdout") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

func TestLlamaInterruptedAttemptDoesNotFallBack(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{{Outcome: runner.Interrupted, Signal: syscall.SIGINT}}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hello"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 130 {
		t.Fatalf("status %d", got)
	}
	if len(b.specs) != 1 {
		t.Errorf("%d attempts after an interrupt", len(b.specs))
	}
}

func TestLlamaFallbackBinaryThatCannotBeHealed(t *testing.T) {
	b := llamaBed(t)
	os.Remove(filepath.Join(b.dir, "bin/llama-simple"))
	b.runs = []runner.Result{{Outcome: runner.Exited, Code: 1}}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hello"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 2 {
		t.Fatalf("status %d", got)
	}
	if !strings.Contains(b.stderr.String(), "attempt 2: llama-simple model fast.gguf: binary missing and not healed") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

func TestLlamaDownloadsAMissingModel(t *testing.T) {
	b := llamaBed(t)
	os.Remove(b.model("fast.gguf"))
	b.runs = []runner.Result{answer("x\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hello"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if ev := b.event("model.download"); ev["result"] != "ok" {
		t.Errorf("event %v", ev)
	}
}

func TestLlamaModelProblems(t *testing.T) {
	b := llamaBed(t)
	unknown := filepath.Join(b.dir, "elsewhere/unknown.gguf")
	if got := b.e.call(context.Background(), "llama-completion", []string{"-m", unknown, "-p", "x"}); got != 127 {
		t.Errorf("unknown missing model: status %d", got)
	}
	if !strings.Contains(b.stderr.String(), "the manifest does not know it; add a [[models]] entry with file = \"unknown.gguf\"") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	b.stderr.Reset()
	guardtest.WriteFile(t, unknown, "<html>not a model</html>", 0o644)
	if got := b.e.call(context.Background(), "llama-completion", []string{"-m", unknown, "-p", "x"}); got != 127 {
		t.Errorf("unknown bad model: status %d", got)
	}
	if !strings.Contains(b.stderr.String(), "(the manifest does not know this file, so guard cannot fetch it)") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	guardtest.WriteGGUF(t, unknown, 32)
	b.runs = []runner.Result{answer("ok\n")}
	if got := b.e.call(context.Background(), "llama-completion", []string{"-m", unknown, "-p", "x"}); got != 0 {
		t.Errorf("unknown good model: status %d", got)
	}
	os.Remove(filepath.Join(b.dir, "mirror/q3.gguf"))
	b.stderr.Reset()
	if got := b.e.call(context.Background(), "llama-completion", []string{"-m", b.model("q3.gguf"), "-p", "x"}); got != 127 {
		t.Errorf("known model with no source: status %d; stderr %s", got, b.stderr.String())
	}
}

func TestLlamaCallsGuardCannotPlanRunDirect(t *testing.T) {
	b := llamaBed(t)
	// -n with no number: the tool's own parser says it better.
	b.e.call(context.Background(), "llama-completion", []string{"-m", b.model("fast.gguf"), "-n", "many"})
	if len(b.specs) != 1 || slices.Contains(b.specs[0].Argv, "-no-cnv") {
		t.Errorf("unplanned call: %+v", b.specs)
	}
	// A person chatting at a terminal gets the tool itself.
	b.e.c.StdinTTY = true
	b.e.call(context.Background(), "llama-completion", []string{"-m", b.model("fast.gguf"), "-cnv"})
	if len(b.execs) != 1 || slices.Contains(b.execs[0], "-no-cnv") {
		t.Errorf("chat: execs %q", b.execs)
	}
	// guard ask needs the answer back: no exec.
	o := &LlamaIO{W: &b.stdout, NoDirect: true}
	if got := b.e.Llama(context.Background(), b.e.c.tool("llama-completion"), []string{"-n"}, o); got != 2 {
		t.Errorf("NoDirect: status %d", got)
	}
}

func TestLlamaPromptFileIsPartOfTheKey(t *testing.T) {
	b := llamaBed(t)
	prompt := filepath.Join(b.dir, "prompt.txt")
	guardtest.WriteFile(t, prompt, "one", 0o644)
	b.onRun = func(s runner.Spec) runner.Result { return answer("answer " + string(rune('0'+len(b.specs))) + "\n") }
	args := []string{"-m", b.model("fast.gguf"), "-f", prompt}
	b.e.call(context.Background(), "llama-completion", args)
	guardtest.WriteFile(t, prompt, "two", 0o644)
	b.e.call(context.Background(), "llama-completion", args)
	if len(b.specs) != 2 || b.stdout.String() != "answer 1\n\nanswer 2\n\n" {
		t.Errorf("%d runs, stdout %q", len(b.specs), b.stdout.String())
	}
	os.Remove(prompt)
	b.e.call(context.Background(), "llama-completion", args) // unreadable: the tool says so
	if len(b.specs) != 3 || slices.Contains(b.specs[2].Argv, "-no-cnv") {
		t.Errorf("unreadable prompt file: %q", b.specs[2].Argv)
	}
}

func TestLlamaCapIsGuardTimeoutFirst(t *testing.T) {
	b := llamaBed(t)
	if c := b.e.capBudget(); c != (budget{60 * time.Second, "[budget] cap"}) {
		t.Errorf("cap %v", c)
	}
	b.e.c.Timeout = 3 * time.Second
	if c := b.e.capBudget(); c != (budget{3 * time.Second, "GUARD_TIMEOUT"}) {
		t.Errorf("cap with GUARD_TIMEOUT %v", c)
	}
	b.e.c.Timeout = 0
	b.e.c.M.Budget.Cap = 0
	if c := b.e.capBudget(); c.d != 300*time.Second {
		t.Errorf("default cap %v", c)
	}
}

// A call whose model must be downloaded while its fallback model is here
// answers now from the fallback, in one stderr line, and the download goes
// on in the background for the next calls.
func TestLlamaAnswersFromAPresentFallbackWhileItsModelDownloads(t *testing.T) {
	b := llamaBed(t)
	os.Remove(b.model("fast.gguf"))
	guardtest.WriteGGUF(t, b.model("q3.gguf"), 96)
	b.runs = []runner.Result{answer("from q3\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hello"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if len(b.specs) != 1 || !slices.Contains(b.specs[0].Argv, b.model("q3.gguf")) || b.stdout.String() != "from q3\n\n" {
		t.Fatalf("runs %+v, stdout %q", b.specs, b.stdout.String())
	}
	// The download's own lines may reach stderr too; the call says one.
	want := "guard: llama-completion: answered by llama-completion with q3.gguf while the download of fast.gguf goes on in the background ("
	if !strings.Contains(b.stderr.String(), want) || strings.Count(b.stderr.String(), "guard: llama-completion: ") != 1 ||
		!strings.HasSuffix(b.stderr.String(), "); wait for it: guard heal --wait fast.gguf\n") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	b.waitJobs()
	if _, err := os.Stat(b.model("fast.gguf")); err != nil {
		t.Errorf("the download in the background: %v", err)
	}
}
