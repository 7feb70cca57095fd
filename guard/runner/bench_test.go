package runner

import (
	"context"
	"os/exec"
	"testing"
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
