package runner

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// BenchmarkRunTrue is the cost of supervising a tool that does nothing.
func BenchmarkRunTrue(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		if r := Run(ctx, Spec{Path: "/bin/true"}); r.Status() != 0 {
			b.Fatalf("got %v %v", r.Outcome, r.Err)
		}
	}
}

// BenchmarkRunTrueWatched adds everything that watches: capture, a
// budget, the stall and prompt watchdogs.
func BenchmarkRunTrueWatched(b *testing.B) {
	ctx := context.Background()
	s := Spec{Path: "/bin/true", Capture: true, Budget: 1 << 40, Stall: 1 << 40, Prompts: PromptsAnswer}
	for b.Loop() {
		if r := Run(ctx, s); r.Status() != 0 {
			b.Fatalf("got %v %v", r.Outcome, r.Err)
		}
	}
}

// BenchmarkBaselineExecCommandTrue is plain os/exec, for comparison with
// the two above in the same run.
func BenchmarkBaselineExecCommandTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuestionDetected is the detection latency of a question guard
// does not recognise: from the start of a tool that prints "Project name: "
// and reads its stdin to the end of the run, with the default quiet time
// (DefaultPromptQuiet). The run's own start is a few milliseconds of it.
func BenchmarkQuestionDetected(b *testing.B) {
	script := writeScript(b, `printf 'Project name: '; read name`)
	in, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	defer w.Close()
	s := Spec{Path: script, Stdin: in, Prompts: PromptsKill, Budget: time.Minute, Grace: time.Second}
	for b.Loop() {
		if r := Run(context.Background(), s); r.Outcome != PromptKilled {
			b.Fatalf("got %v prompt %q", r.Outcome, r.Prompt)
		}
	}
}

// BenchmarkSessionGroups is one look through /proc for the groups of a
// session: what a timeout, an interrupt and the kill after the grace pay
// (at least twice each) to reach a tool's job-control jobs.
func BenchmarkSessionGroups(b *testing.B) {
	sid := os.Getpid()
	for b.Loop() {
		_ = sessionGroups(sid)
	}
}
