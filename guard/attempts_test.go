package guard

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
)

const chainManifest = `
[tools.jq]
timeout = "5s"
args = ["-M"]
fallback = ["python3"]

[tools.python3]
timeout = "8s"

[budget]
cap = "60s"
`

// logNames lists the events of the bed's log, in order.
func (b *testBed) logNames() []string {
	var names []string
	for _, ev := range b.events() {
		names = append(names, ev["event"].(string))
	}
	return names
}

func TestFallbackRunsForAnyTool(t *testing.T) {
	b := newBed(t, chainManifest)
	b.tool("bin/jq")
	python := b.tool("bin/python3")
	b.runs = []runner.Result{{Outcome: runner.TimedOut, Stdout: runner.NewOutput([]byte("half ")), StdoutN: 5, Elapsed: 5 * time.Second}, answer("whole\n")}
	if got := b.e.call(context.Background(), "jq", []string{".a"}); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if b.stdout.String() != "whole\n\n" {
		t.Errorf("stdout %q: only a good attempt's output may reach it", b.stdout.String())
	}
	if len(b.specs) != 2 || b.specs[0].Budget != 5*time.Second || !slices.Equal(b.specs[0].Argv[1:], []string{"-M", ".a"}) {
		t.Fatalf("first attempt %+v", b.specs)
	}
	// Same arguments, its own forced flags (none) and budget.
	second := b.specs[1]
	if second.Path != python || !slices.Equal(second.Argv[1:], []string{".a"}) || second.Budget != 8*time.Second || second.Stdout != nil {
		t.Errorf("fallback attempt %q %q budget %v", second.Path, second.Argv, second.Budget)
	}
	if !strings.Contains(b.stderr.String(), "guard: jq: trying python3 (after-timeout)") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	if names := b.logNames(); !slices.Contains(names, "fallback") || !slices.Contains(names, "call.end") {
		t.Errorf("events %v", names)
	}
}

func TestFallbackChainAllFailIsExit2(t *testing.T) {
	b := newBed(t, chainManifest)
	b.tool("bin/jq")
	b.tool("bin/python3")
	b.runs = []runner.Result{{Outcome: runner.Exited, Code: 3, Stdout: runner.NewOutput([]byte("x")), StdoutN: 1}, {Outcome: runner.Exited, Code: 1}}
	if got := b.e.call(context.Background(), "jq", []string{".a"}); got != 2 {
		t.Fatalf("status %d", got)
	}
	for _, want := range []string{
		"guard: jq: every attempt failed:\n",
		"  attempt 1: jq: exit 3 after 0.0s\n",
		"  attempt 2: python3: exit 1 after 0.0s\n",
	} {
		if !strings.Contains(b.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, b.stderr.String())
		}
	}
	if b.stdout.Len() != 0 {
		t.Errorf("stdout %q after every attempt failed", b.stdout.String())
	}
}

// Exit 0 with nothing on stdout is a good answer from any tool but a
// llama one (`test -f x`, `true`).
func TestFallbackEmptyOutputIsFineForOtherTools(t *testing.T) {
	b := newBed(t, chainManifest)
	b.tool("bin/jq")
	b.tool("bin/python3")
	if got := b.e.call(context.Background(), "jq", []string{"-e", "."}); got != 0 || len(b.specs) != 1 {
		t.Errorf("status %d, %d attempts", got, len(b.specs))
	}
}

func TestLlamaRetriesAnEmptyAnswerOnce(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{{Outcome: runner.Exited, Elapsed: time.Second}, answer("four\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "2+2?", "-n", "8"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	if b.stdout.String() != "four\n\n" || len(b.specs) != 2 {
		t.Fatalf("stdout %q after %d runs", b.stdout.String(), len(b.specs))
	}
	first, again := b.specs[0], b.specs[1]
	if again.Path != first.Path || !slices.Equal(again.Argv, first.Argv) {
		t.Errorf("the retry is not the same call: %q vs %q", again.Argv, first.Argv)
	}
	if again.Budget != first.Budget-time.Second { // what the empty run left of its budget
		t.Errorf("retry budget %v, first %v", again.Budget, first.Budget)
	}
	if names := b.logNames(); !slices.Contains(names, "retry") || slices.Contains(names, "fallback") {
		t.Errorf("events %v, want a retry and no fallback", names)
	}
	if !strings.Contains(b.stderr.String(), "guard: llama-completion: exit 0 with nothing on stdout; trying it once more") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

func TestLlamaRetryThenFallsBack(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{{Outcome: runner.Exited}, {Outcome: runner.Exited}, answer("simple\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hi"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	var tools []string
	for _, s := range b.specs {
		tools = append(tools, filepath.Base(s.Path))
	}
	if !slices.Equal(tools, []string{"llama-completion", "llama-completion", "llama-simple"}) || b.stdout.String() != "simple\n\n" {
		t.Errorf("ran %v, stdout %q", tools, b.stdout.String())
	}
}

// A prompt-cache hit is a healthy call: it must not open the heal log.
func TestCacheHitDoesNotTouchTheLog(t *testing.T) {
	b := llamaBed(t)
	b.runs = []runner.Result{answer("four\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "2+2?", "-n", "8"}
	b.e.call(context.Background(), "llama-completion", args)
	b.events() // flush
	os.Remove(filepath.Join(b.dir, "selfheal.log"))
	b.stdout.Reset()
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 || b.stdout.String() != "four\n\n" || len(b.specs) != 1 {
		t.Fatalf("repeat: status %d, stdout %q, %d runs", got, b.stdout.String(), len(b.specs))
	}
	b.e.Close()
	if _, err := os.Stat(filepath.Join(b.dir, "selfheal.log")); err == nil {
		t.Errorf("a cache hit wrote the heal log: %v", b.logNames())
	}
	if st, _ := b.e.PromptCache().Stats(); st.Hits != 1 {
		t.Errorf("cache hits %d, want 1", st.Hits)
	}
}

// A prompt file that is a pipe or a device is never read by guard: the
// call runs uncached with the arguments as given, and no llama-simple
// attempt, which would need the text.
func TestLlamaPromptFileThatIsNotAFile(t *testing.T) {
	b := llamaBed(t)
	fifo := filepath.Join(b.dir, "prompt.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(b.dir, "big.txt")
	guardtest.WriteFile(t, big, strings.Repeat("x", maxPromptFile+1), 0o644)
	for _, file := range []string{fifo, "/dev/zero", big} {
		b.specs, b.runs = nil, []runner.Result{{Outcome: runner.Exited, Code: 1}}
		args := []string{"-m", b.model("fast.gguf"), "-f", file, "-n", "4"}
		guardtest.Within(t, "a call with -f "+file, func() {
			// 2: the plan still has fast.gguf's timeout fallback.
			if got := b.e.call(context.Background(), "llama-completion", args); got != 2 {
				t.Errorf("-f %s: status %d, want 2", file, got)
			}
		})
		if len(b.specs) != 1 || !slices.Contains(b.specs[0].Argv, file) || !slices.Contains(b.specs[0].Argv, "-no-cnv") {
			t.Errorf("-f %s: runs %+v", file, b.specs)
		}
	}
	b.specs, b.runs = nil, []runner.Result{answer("a\n"), answer("b\n")}
	args := []string{"-m", b.model("fast.gguf"), "-f", fifo, "-n", "4"}
	b.e.call(context.Background(), "llama-completion", args)
	b.e.call(context.Background(), "llama-completion", args)
	if len(b.specs) != 2 {
		t.Errorf("a pipe's prompt was answered from the cache")
	}
}

// A heal outlives the call that needs it: the call's budget ends the wait
// (75 and one line naming the budget that stopped it), never the build,
// and the next call finds the tool healed.
func TestAHealOutlivesTheCallsBudget(t *testing.T) {
	b := newBed(t, `
[builds.jq]
dir = "$DIR/src"
steps = [["make"]]
timeout = "30m"

[tools.jq]
path = "$DIR/bin/jq"
build = "jq"
timeout = "300ms"
`)
	release := make(chan struct{})
	var deadline time.Time
	var hasDeadline bool
	b.build = func(ctx context.Context, tool string, rec *manifest.Build, target string) error {
		deadline, hasDeadline = ctx.Deadline()
		<-release
		b.tool("bin/jq")
		return ctx.Err()
	}
	if got := b.e.call(context.Background(), "jq", nil); got != StatusHealing {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	want := "guard: jq: the build of jq goes on in the background (time left unknown): the call's budget of 0.3s ([tools.jq] timeout) ran out after "
	if !strings.HasPrefix(b.stderr.String(), want) || strings.Count(b.stderr.String(), "\n") != 1 ||
		!strings.HasSuffix(b.stderr.String(), " of waiting; wait for it: guard heal --wait jq, or call again later\n") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	close(release)
	b.waitJobs()
	if hasDeadline {
		t.Errorf("the build had the deadline %v: a call's budget must not stop it", deadline)
	}
	b.stderr.Reset()
	if got := b.e.call(context.Background(), "jq", nil); got != 0 || len(b.specs) != 1 {
		t.Fatalf("after the heal: status %d, runs %d; stderr %s", got, len(b.specs), b.stderr.String())
	}
}

// A heal that guard's own state folder fails (no lock, no stamp) is guard
// failing, not the model: the call goes on without it, after one warning.
func TestModelHealFailsOpenWhenTheStateFolderFails(t *testing.T) {
	b := llamaBed(t)
	os.Remove(b.model("fast.gguf"))
	os.RemoveAll(b.e.c.StateDir)
	guardtest.WriteFile(t, b.e.c.StateDir, "a file where guard's state folder should be", 0o644)
	b.runs = []runner.Result{answer("x\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hi"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 || len(b.specs) != 1 {
		t.Fatalf("status %d after %d runs; stderr %s", got, len(b.specs), b.stderr.String())
	}
	if !strings.Contains(b.stderr.String(), "running the call without the heal: guard cannot write its state folder") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	// A model that cannot be healed for its own reasons is still 127.
	b = llamaBed(t)
	os.Remove(b.model("fast.gguf"))
	os.Remove(filepath.Join(b.dir, "mirror/fast.gguf"))
	args = []string{"-m", b.model("fast.gguf"), "-p", "hi"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 127 || len(b.specs) != 0 {
		t.Errorf("unhealable model: status %d, %d runs", got, len(b.specs))
	}
}

// perfLine is llama.cpp's own speed line for tps tokens per second.
func perfLine(tps float64) string {
	return fmt.Sprintf("llama_perf_context_print:        eval time =    %.2f ms /    50 runs   (   %.2f ms per token,    %.2f tokens per second)\n", 50/tps*1000, 1000/tps, tps)
}

// Budgets follow the speed measured on this machine: after three calls at
// 100 tokens/s a model declared at 4 gets a budget from 50 (the low
// percentile, halved), and the change is logged once.
func TestLlamaLearnsTheMachinesSpeed(t *testing.T) {
	b := llamaBed(t, "GUARD_CACHE=off")
	b.onRun = func(s runner.Spec) runner.Result {
		io.WriteString(s.Stderr, "llama_perf_context_print: prompt eval time =      40.00 ms /     4 tokens (   10.00 ms per token,   100.00 tokens per second)\n")
		io.WriteString(s.Stderr, perfLine(100))
		return answer("ok\n")
	}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hi", "-n", "40"}
	for range 4 {
		if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
			t.Fatalf("status %d; stderr %s", got, b.stderr.String())
		}
	}
	var budgets []time.Duration
	for _, s := range b.specs {
		budgets = append(budgets, s.Budget)
	}
	// 10 s + 40 tokens at the declared 4/s, then at the learned 50/s.
	want := []time.Duration{20 * time.Second, 20 * time.Second, 20 * time.Second, 10800 * time.Millisecond}
	if !slices.Equal(budgets, want) {
		t.Errorf("budgets %v, want %v", budgets, want)
	}
	if low, n := b.e.Speeds().Measured("fast.gguf"); n != 4 || low < 99.9 || low > 100.1 {
		t.Errorf("measured %v over %d calls", low, n)
	}
	var learned []map[string]any
	for _, ev := range b.events() {
		if ev["event"] == "budget.learned" {
			learned = append(learned, ev)
		}
	}
	if len(learned) != 1 || !strings.Contains(learned[0]["reason"].(string), "fast.gguf: budgets use 50.0 tokens/s instead of 4.0") {
		t.Errorf("budget.learned events %v", learned)
	}
	// GUARD_TIMEOUT is the person's choice: no measured speed replaces it.
	b.e.c.Timeout = 7 * time.Second
	b.e.call(context.Background(), "llama-completion", args)
	if got := b.specs[len(b.specs)-1].Budget; got != 7*time.Second {
		t.Errorf("with GUARD_TIMEOUT: budget %v", got)
	}
}

// The real llama-completion's logger can also lose the end of an answer:
// exit 0 without the blank line it writes last. That answer is not passed
// on (nor cached): it is retried, then the plan falls back.
func TestLlamaRetriesAnAnswerCutShort(t *testing.T) {
	b := llamaBed(t)
	cut := runner.Result{Outcome: runner.Exited, Stdout: runner.NewOutput([]byte(" question 4\xb6\x94F")), StdoutN: 15}
	b.runs = []runner.Result{cut, answer("whole answer\n")}
	args := []string{"-m", b.model("fast.gguf"), "-p", "question 4"}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 || b.stdout.String() != "whole answer\n\n" {
		t.Fatalf("status %d, stdout %q; stderr %s", got, b.stdout.String(), b.stderr.String())
	}
	if !strings.Contains(b.stderr.String(), "guard: llama-completion: exit 0 with its answer cut short (no final blank line); trying it once more") {
		t.Errorf("stderr %q", b.stderr.String())
	}
	// Cut short twice: llama-simple answers, and nothing cut reaches stdout.
	b = llamaBed(t)
	b.runs = []runner.Result{cut, cut, answer("simple\n")}
	if got := b.e.call(context.Background(), "llama-completion", args); got != 0 || b.stdout.String() != "simple\n\n" {
		t.Fatalf("twice cut: status %d, stdout %q", got, b.stdout.String())
	}
	// A streamed answer (no fallback to buffer for) is already out: judged
	// only by its exit status, as before.
	b = llamaBed(t)
	b.e.c.M.Tools["llama-completion"].Fallback = nil
	guardtest.WriteGGUF(t, b.model("q3.gguf"), 96)
	b.runs = []runner.Result{cut}
	if got := b.e.call(context.Background(), "llama-completion", []string{"-m", b.model("q3.gguf"), "-p", "x"}); got != 0 || len(b.specs) != 1 {
		t.Errorf("streamed: status %d after %d runs", got, len(b.specs))
	}
}

// A signal guard forwards to an attempt of a chain: a tool that handles it
// and ends by itself gives its own status and what it printed, as a
// direct call (and a call with no fallback) would; one guard had to kill
// gives 128+N and nothing. No fallback runs after either.
func TestInterruptedAttemptOfAChain(t *testing.T) {
	b := newBed(t, chainManifest)
	b.tool("bin/jq")
	b.tool("bin/python3")
	b.runs = []runner.Result{{Outcome: runner.Interrupted, Signal: syscall.SIGTERM, Own: true, Code: 0,
		Stdout: runner.NewOutput([]byte("answer so far\n")), StdoutN: 14}}
	if got := b.e.call(context.Background(), "jq", []string{".a"}); got != 0 || b.stdout.String() != "answer so far\n" || len(b.specs) != 1 {
		t.Errorf("handled signal: status %d, stdout %q, %d runs", got, b.stdout.String(), len(b.specs))
	}
	b = newBed(t, chainManifest)
	b.tool("bin/jq")
	b.tool("bin/python3")
	b.runs = []runner.Result{{Outcome: runner.Interrupted, Signal: syscall.SIGTERM, Own: true, Code: 7,
		Stdout: runner.NewOutput([]byte("partial\n")), StdoutN: 8}}
	if got := b.e.call(context.Background(), "jq", nil); got != 7 || b.stdout.String() != "partial\n" {
		t.Errorf("own exit 7: status %d, stdout %q", got, b.stdout.String())
	}
	b = newBed(t, chainManifest)
	b.tool("bin/jq")
	b.tool("bin/python3")
	b.runs = []runner.Result{{Outcome: runner.Interrupted, Signal: syscall.SIGTERM,
		Stdout: runner.NewOutput([]byte("half")), StdoutN: 4}}
	if got := b.e.call(context.Background(), "jq", nil); got != 143 || b.stdout.Len() != 0 || len(b.specs) != 1 {
		t.Errorf("killed: status %d, stdout %q, %d runs", got, b.stdout.String(), len(b.specs))
	}
}

const chainBuildManifest = `
[builds.jq]
dir = "$DIR/src"
steps = [["make"]]

[tools.jq]
path = "$DIR/bin/jq"
build = "jq"
fallback = ["python3"]

[tools.python3]
path = "$DIR/bin/python3"
`

// A fallback chain whose first tool's build outlives the call's budget:
// with its fallback missing too, the only problem is time, so the call
// ends with 75 and the heal's one line, never 2 ("every attempt failed");
// with the fallback here, the fallback answers, in one line.
func TestAChainWaitingOnAHealIs75Not2(t *testing.T) {
	b := newBed(t, chainBuildManifest, "GUARD_TIMEOUT=300ms")
	release := make(chan struct{})
	b.build = func(ctx context.Context, tool string, rec *manifest.Build, target string) error {
		<-release
		b.tool("bin/jq")
		return nil
	}
	defer close(release)
	if got := b.e.call(context.Background(), "jq", nil); got != StatusHealing {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	want := "guard: jq: the build of jq goes on in the background (time left unknown): the call's budget of 0.3s (GUARD_TIMEOUT) ran out after "
	if !strings.HasPrefix(b.stderr.String(), want) || strings.Count(b.stderr.String(), "\n") != 1 {
		t.Errorf("stderr %q", b.stderr.String())
	}

	// The fallback is here: it answers while the build goes on.
	b.tool("bin/python3")
	b.stderr.Reset()
	b.runs = []runner.Result{answer("from python\n")}
	b.e.c.Timeout = 0 // the cap's default: time for the fallback after the wait
	b.e.c.M.Budget.Cap = manifest.Duration(400 * time.Millisecond)
	if got := b.e.call(context.Background(), "jq", nil); got != 0 || b.stdout.String() != "from python\n\n" {
		t.Fatalf("status %d, stdout %q; stderr %s", got, b.stdout.String(), b.stderr.String())
	}
	if !strings.Contains(b.stderr.String(), "guard: jq: answered by python3 while the build of jq goes on in the background (") {
		t.Errorf("stderr %q", b.stderr.String())
	}
}

// A wait for a heal that stops early to leave the fallback its planned
// time, when the fallback then fails too: the 75 line says the call
// stopped waiting for the fallback's time, not that its budget ran out.
func TestAChainWaitCutForTheFallbackSaysSo(t *testing.T) {
	b := newBed(t, chainBuildManifest+`timeout = "600ms"
`)
	release := make(chan struct{})
	b.build = func(ctx context.Context, tool string, rec *manifest.Build, target string) error {
		<-release
		b.tool("bin/jq")
		return nil
	}
	defer close(release)
	b.tool("bin/python3")
	b.runs = []runner.Result{{Outcome: runner.Exited, Code: 1}}
	b.e.c.M.Budget.Cap = manifest.Duration(1200 * time.Millisecond)
	if got := b.e.call(context.Background(), "jq", nil); got != StatusHealing || len(b.specs) != 1 {
		t.Fatalf("status %d, runs %d; stderr %s", got, len(b.specs), b.stderr.String())
	}
	line := b.stderr.String()[strings.LastIndex(strings.TrimSuffix(b.stderr.String(), "\n"), "\n")+1:]
	want := regexp.MustCompile(`^guard: jq: the build of jq goes on in the background \(time left unknown\): ` +
		`the call stopped waiting after \d+\.\ds to leave python3's planned 0\.6s of its budget of 1\.2s \(\[budget\] cap\), and no attempt answered; ` +
		`wait for it: guard heal --wait jq, or call again later\n$`)
	if !want.MatchString(line) {
		t.Errorf("last line %q; stderr %s", line, b.stderr.String())
	}
}

// A wait the heal's own estimate stops while a later attempt's time is
// set aside names that time too: the budget alone would have fitted.
func TestHealingLineCannotFitLessTheFallbacksTime(t *testing.T) {
	he := &healingError{rec: healjob.Record{What: "the build of jq", Names: []string{"jq"}, Percent: -1, LeftMS: 9000},
		cannotFit: true, limit: "10.0s (GUARD_TIMEOUT)", leftFor: "python3's planned 6.0s"}
	want := "the build of jq goes on in the background (about 9s left): it cannot end within what is left of the call's budget of 10.0s (GUARD_TIMEOUT) less python3's planned 6.0s; wait for it: guard heal --wait jq, or call again later"
	if got := he.Error(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// A heal whose time left is unknown never "cannot fit", even when the
// poll comes after the deadline (a loaded machine): the call then says its
// budget ran out. A known time left past the deadline cannot fit.
func TestCannotFitNeedsAKnownTimeLeft(t *testing.T) {
	gone, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if cannotFit(gone, -1) {
		t.Error("an unknown time left past the deadline counted as cannot fit")
	}
	if !cannotFit(gone, 5*time.Second) {
		t.Error("5s left past the deadline fits")
	}
	later, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	if cannotFit(later, time.Second) || !cannotFit(later, 2*time.Hour) {
		t.Error("a known time left against an hour's deadline")
	}
	if cannotFit(context.Background(), time.Hour) {
		t.Error("no deadline: everything fits")
	}
}

// A learned budget that ends a run is forgotten: the machine is no longer
// the one the speeds were learned on, and the next calls budget from the
// manifest's rate again, with budget.learned saying so.
func TestALearnedBudgetThatEndsARunIsForgotten(t *testing.T) {
	b := llamaBed(t, "GUARD_CACHE=off")
	slow := false
	b.onRun = func(s runner.Spec) runner.Result {
		if slow {
			return runner.Result{Outcome: runner.TimedOut, Elapsed: s.Budget, Stdout: runner.NewOutput(nil)}
		}
		io.WriteString(s.Stderr, perfLine(100))
		return answer("ok\n")
	}
	args := []string{"-m", b.model("fast.gguf"), "-p", "hi", "-n", "40"}
	for range 3 {
		if got := b.e.call(context.Background(), "llama-completion", args); got != 0 {
			t.Fatalf("status %d; stderr %s", got, b.stderr.String())
		}
	}
	if _, _, ok := b.e.Speeds().Learned("fast.gguf"); !ok {
		t.Fatal("nothing learned after three calls")
	}
	slow = true
	b.e.call(context.Background(), "llama-completion", args)
	if _, _, ok := b.e.Speeds().Learned("fast.gguf"); ok {
		t.Error("the learned speeds outlived a run their budget ended")
	}
	var forgot bool
	for _, ev := range b.events() {
		if r, _ := ev["reason"].(string); ev["event"] == "budget.learned" && strings.Contains(r, "ran past its learned budget of 10.8s") {
			forgot = true
		}
	}
	if !forgot {
		t.Errorf("no budget.learned event for the forgotten speeds: %v", b.events())
	}
}
