package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A download that waits out a retry back-off must not show an ETA that
// climbs while nothing moves: the wait shows why instead, and the next
// attempt's rate counts only its own time.
func TestETADuringRetryBackoff(t *testing.T) {
	t.Parallel()
	r := Start(&bytes.Buffer{}, "downloading m.gguf", 1000, Pace{Every: time.Hour})
	defer r.Stop("")
	r.Add(400)
	r.mu.Lock()
	r.start = r.start.Add(-10 * time.Second) // 400 bytes in 10 s, then a drop
	r.mu.Unlock()
	r.Wait("retrying in 4s")
	line := r.Line()
	if strings.Contains(line, "eta") || strings.Contains(line, "B/s") || !strings.HasSuffix(line, ": retrying in 4s") {
		t.Fatalf("line while waiting: %q", line)
	}
	r.SetBase(400) // the next attempt resumes at byte 400
	r.Add(100)
	line = r.Line()
	if strings.Contains(line, "retrying") {
		t.Fatalf("still waiting after the next attempt began: %q", line)
	}
	// 100 bytes in no time at all: the ETA is about nothing, not the 50 s
	// that 500 bytes over the whole 10 s would give.
	if !strings.Contains(line, " eta 0s") {
		t.Fatalf("line after the resume: %q", line)
	}
}

// A build's percent only moves forward: CMake's is per target, so the
// second target starts again low (58%, then 4%) on the real llama.cpp.
// Ninja's [N/M] is the same rule.
func TestBuildPercentNeverGoesBack(t *testing.T) {
	t.Parallel()
	clock := time.Unix(0, 0)
	r := start(&bytes.Buffer{}, false, "building llama-cpp", 0, timing{nil, func() time.Time { return clock }}, nil)
	defer r.Stop("")
	var seen []float64
	for _, line := range []string{
		"[ 12%] Building C object ggml/src/a.o",
		"[ 25%] Building C object ggml/src/b.o",
		"[ 58%] Linking CXX shared library libggml.so",
		"[  4%] Building CXX object src/llama.o", // the next target
		"[ 30%] Building CXX object src/llama-model.o",
		"[ 84%] Building CXX object tools/completion.o",
		"[100%] Built target llama-completion",
	} {
		r.SetStatus(line)
		seen = append(seen, r.Snapshot().Percent)
	}
	want := []float64{12, 25, 58, 58, 58, 84, 100}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("percents %v, want %v", seen, want)
		}
	}
	if line := r.Line(); !strings.Contains(line, "100%") || !strings.HasSuffix(line, "Built target llama-completion") {
		t.Errorf("line %q", line)
	}
}

// A first build (no earlier build to go by) gets a time left from its own
// rate once it has run a while, marked as an estimate; before that, and
// with an earlier build's length, it is not.
func TestFirstBuildEstimatesFromItsOwnRate(t *testing.T) {
	t.Parallel()
	clock := time.Unix(0, 0)
	r := start(&bytes.Buffer{}, false, "building llama-cpp", 0, timing{nil, func() time.Time { return clock }}, nil)
	defer r.Stop("")
	r.SetStatus("[ 10%] Building C object a.o")
	clock = clock.Add(10 * time.Second)
	if s := r.Snapshot(); s.Left >= 0 || s.Estimated {
		t.Fatalf("after 10 s: %+v, want no time left yet", s)
	}
	if line := r.Line(); strings.Contains(line, "left") {
		t.Errorf("line after 10 s: %q", line)
	}
	clock = clock.Add(20 * time.Second) // 30 s in
	r.SetStatus("[ 25%] Building C object b.o")
	s := r.Snapshot()
	if s.Left != 90*time.Second || !s.Estimated {
		t.Fatalf("after 30 s at 25%%: %+v, want 90s left, estimated", s)
	}
	if line := r.Line(); !strings.Contains(line, ", about 1m30s left (estimated from its rate so far) (30s)") {
		t.Errorf("line %q", line)
	}
	r.Expect(2 * time.Minute) // an earlier build's length wins
	if s := r.Snapshot(); s.Left != 90*time.Second || s.Estimated {
		t.Errorf("with an earlier build: %+v, want 90s left from it, not estimated", s)
	}
}

// A build that runs past the length it was expected to take (the last
// build was an incremental one; this one starts from nothing) says so and
// goes by its own rate: a cold llama.cpp build ran 7 min 13 s while calls
// said "about 48-50 s left" (issue 36).
func TestABuildPastItsExpectationSaysSoAndGoesByItsRate(t *testing.T) {
	t.Parallel()
	clock := time.Unix(0, 0)
	r := start(&bytes.Buffer{}, false, "building llama-cpp", 0, timing{nil, func() time.Time { return clock }}, nil)
	defer r.Stop("")
	r.Expect(50 * time.Second)
	clock = clock.Add(30 * time.Second)
	r.SetStatus("[  4%] Building C object a.o")
	if s := r.Snapshot(); s.Over != 0 || s.Estimated || s.Left != 48*time.Second {
		t.Fatalf("within its expectation: %+v, want 48s left from it", s)
	}
	clock = clock.Add(30 * time.Second) // 60 s in, 5%
	r.SetStatus("[  5%] Building C object b.o")
	s := r.Snapshot()
	if s.Over != 50*time.Second || !s.Estimated || s.Left != 1140*time.Second {
		t.Fatalf("past its expectation: %+v, want over 50s, 19m0s left from its rate", s)
	}
	if line := r.Line(); !strings.Contains(line, " 5%, past the 50s expected, about 19m0s left (estimated from its rate so far) (1m0s)") {
		t.Errorf("line %q", line)
	}
}
