package speed_test

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/speed"
)

// The final lines of the real tools (llama.cpp master of 2026-08).
const (
	completionTail = `llama_perf_sampler_print:    sampling time =       2.10 ms /    40 runs   (    0.05 ms per token, 19047.62 tokens per second)
llama_perf_context_print:        load time =     210.55 ms
llama_perf_context_print: prompt eval time =      95.12 ms /     8 tokens (   11.89 ms per token,    84.10 tokens per second)
llama_perf_context_print:        eval time =    1250.00 ms /    31 runs   (   40.32 ms per token,    24.80 tokens per second)
llama_perf_context_print:       total time =    1380.40 ms /    39 tokens
llama_perf_context_print:    graphs reused =         30
`
	simpleTail = `main: decoded 32 tokens in 2.00 s, speed: 16.00 t/s

llama_perf_sampler_print:    sampling time =       1.20 ms /    33 runs   (    0.04 ms per token, 27500.00 tokens per second)
llama_perf_context_print:        load time =     180.00 ms
llama_perf_context_print: prompt eval time =      40.00 ms /     4 tokens (   10.00 ms per token,   100.00 tokens per second)
llama_perf_context_print:        eval time =    2000.00 ms /    32 runs   (   62.50 ms per token,    16.00 tokens per second)
llama_perf_context_print:       total time =    2200.00 ms /    36 tokens
`
)

func TestParse(t *testing.T) {
	for line, want := range map[string]float64{
		"llama_perf_context_print:        eval time =    1250.00 ms /    31 runs   (   40.32 ms per token,    24.80 tokens per second)": 24.8,
		"eval time = 500 ms / 50 runs": 100,
	} {
		if got, ok := speed.Parse(line); !ok || math.Abs(got-want) > 0.001 {
			t.Errorf("Parse(%q) = %v, %v; want %v", line, got, ok, want)
		}
	}
	for _, line := range []string{
		"llama_perf_context_print: prompt eval time =      95.12 ms /     8 tokens (   11.89 ms per token,    84.10 tokens per second)",
		"llama_perf_sampler_print:    sampling time =       2.10 ms /    40 runs",
		"eval time = 0.00 ms / 5 runs",
		"eval time = 100 ms / 1 runs", // one token says nothing about speed
		"eval time = -5 ms / 50 runs",
		"eval time = NaN ms / 50 runs",
		"eval time = 12 ms",
		"eval time = 1e-320 ms / 5 runs", // Inf tokens per second
		"eval time = Inf ms / 5 runs",
		"",
	} {
		if got, ok := speed.Parse(line); ok {
			t.Errorf("Parse(%q) = %v, want no speed", line, got)
		}
	}
}

func TestTailKeepsTheLastSpeedAndPassesEverythingOn(t *testing.T) {
	for name, text := range map[string]string{"completion": completionTail, "simple": simpleTail} {
		var out strings.Builder
		tail := &speed.Tail{W: &out}
		// Written in awkward pieces, as a pipe delivers it.
		for i := 0; i < len(text); i += 7 {
			io.WriteString(tail, text[i:min(i+7, len(text))])
		}
		if out.String() != text {
			t.Errorf("%s: passed on %q", name, out.String())
		}
		want := map[string]float64{"completion": 24.8, "simple": 16}[name]
		if got, ok := tail.Rate(); !ok || math.Abs(got-want) > 0.001 {
			t.Errorf("%s: Rate = %v, %v; want %v", name, got, ok, want)
		}
	}
	// A last line with no newline counts; a huge line is not held.
	tail := &speed.Tail{}
	io.WriteString(tail, strings.Repeat("x", 1<<20))
	io.WriteString(tail, "\neval time = 500 ms / 50 runs")
	if got, ok := tail.Rate(); !ok || got != 100 {
		t.Errorf("Rate = %v, %v", got, ok)
	}
	if _, ok := (&speed.Tail{}).Rate(); ok {
		t.Error("a silent tool has a speed")
	}
}

func TestStoreLearnsALowPercentile(t *testing.T) {
	s := speed.Store{Path: filepath.Join(t.TempDir(), "speeds.json"), Machine: "box"}
	if _, n := s.Measured("m.gguf"); n != 0 {
		t.Fatal("a new store knows something")
	}
	if _, ok := s.Rate("m.gguf"); ok {
		t.Fatal("a rate before any sample")
	}
	var changes []speed.Change
	for _, tps := range []float64{40, 50, 44, 60, 30, 48, 52, 47, 45, 41} {
		c, err := s.Record("m.gguf", tps, time.Second, 10)
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, c)
	}
	low, n := s.Measured("m.gguf")
	if n != 10 || low != 30 { // nearest-rank 10th percentile of ten: the lowest
		t.Errorf("measured %v over %d", low, n)
	}
	if rate, ok := s.Rate("m.gguf"); !ok || rate != 15 { // with the safety factor of 2
		t.Errorf("rate %v, %v", rate, ok)
	}
	// The rate in use stays within 2x of the declared 10 (20 at the third
	// sample is exactly 2x, not more): nothing to log.
	var learned []int
	for i, c := range changes {
		if c.Learned {
			learned = append(learned, i)
		}
	}
	if len(learned) != 0 {
		t.Errorf("learned at %v; 15-22 tokens/s is within 2x of the declared 10", learned)
	}
	c, _ := s.Record("other.gguf", 100, time.Second, 10)
	c2, _ := s.Record("other.gguf", 100, time.Second, 10)
	c3, _ := s.Record("other.gguf", 100, time.Second, 10)
	if c.Learned || c2.Learned || !c3.Learned || c3.From != 10 || c3.To != 50 {
		t.Errorf("other: %+v %+v %+v", c, c2, c3)
	}
	// Another machine sharing the folder learns on its own.
	o := speed.Store{Path: s.Path, Machine: "other-box"}
	if _, n := o.Measured("m.gguf"); n != 0 {
		t.Error("one machine's speeds served another")
	}
}

func TestStoreKeepsTheLastK(t *testing.T) {
	s := speed.Store{Path: filepath.Join(t.TempDir(), "speeds.json"), Machine: "box"}
	for i := range 3 * speed.K {
		s.Record("m.gguf", float64(i+1), time.Second, 0)
	}
	if low, n := s.Measured("m.gguf"); n != speed.K || low <= float64(2*speed.K) {
		t.Errorf("measured %v over %d: old samples kept", low, n)
	}
	data, _ := os.ReadFile(s.Path)
	if len(data) > 4096 {
		t.Errorf("the file grew to %d bytes", len(data))
	}
}

func TestStoreSurvivesABadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "speeds.json")
	os.WriteFile(path, []byte("{not json"), 0o600)
	s := speed.Store{Path: path, Machine: "box"}
	if _, n := s.Measured("m.gguf"); n != 0 {
		t.Error("a bad file gave samples")
	}
	if _, err := s.Record("m.gguf", 10, time.Second, 5); err != nil {
		t.Fatal(err)
	}
	if _, n := s.Measured("m.gguf"); n != 1 {
		t.Errorf("after a record over a bad file: %d samples", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, line := range strings.Split(completionTail+simpleTail, "\n") {
		f.Add(line)
	}
	f.Add("eval time = 1e308 ms / 2147483647 runs")
	f.Add("eval time = 1e-300 ms / 5 runs")
	f.Add("eval time = 1e-320 ms / 5 runs")
	f.Fuzz(func(t *testing.T, line string) {
		if tps, ok := speed.Parse(line); ok && (!(tps > 0) || math.IsInf(tps, 0)) {
			t.Errorf("Parse(%q) = %v", line, tps)
		}
	})
}

// A learned budget has a floor: Floor, and twice the longest of the last
// good runs. Forget drops what was learned.
func TestLearnedFloor(t *testing.T) {
	s := speed.Store{Path: filepath.Join(t.TempDir(), "speeds.json"), Machine: "box"}
	for _, took := range []time.Duration{time.Second, 2 * time.Second} {
		s.Record("m.gguf", 7500, took, 0)
	}
	if _, _, ok := s.Learned("m.gguf"); ok {
		t.Fatal("learned from two runs")
	}
	s.Record("m.gguf", 600, 300*time.Millisecond, 0)
	tps, floor, ok := s.Learned("m.gguf")
	if !ok || tps != 300 || floor != speed.Floor {
		t.Errorf("fast runs: %v tokens/s, floor %v, %v; want 300, %v", tps, floor, ok, speed.Floor)
	}
	s.Record("m.gguf", 600, 8*time.Second, 0)
	if _, floor, _ := s.Learned("m.gguf"); floor != 16*time.Second {
		t.Errorf("after an 8 s run the floor is %v, want 16s", floor)
	}
	if err := s.Forget("m.gguf"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Learned("m.gguf"); ok {
		t.Error("learned after Forget")
	}
	if _, n := s.Measured("m.gguf"); n != 0 {
		t.Errorf("%d samples after Forget", n)
	}
}
