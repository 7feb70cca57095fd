package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
)

func msD(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func TestSummarize(t *testing.T) {
	if got := Summarize(nil); got != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", got)
	}
	mk := func(walls ...float64) []Sample {
		var s []Sample
		for i, w := range walls {
			s = append(s, Sample{Wall: msD(w), CPU: msD(w / 2), MaxRSS: int64(i+1) << 20, Faults: int64(10 * (i + 1))})
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		walls []float64
		want  Summary
	}{
		{"odd", []float64{5, 1, 4, 2, 3}, Summary{N: 5, Median: msD(3), Mean: msD(3), P90: msD(5), CPU: msD(1.5), MaxRSS: 3 << 20, Faults: 30}},
		// Even: the median is the mean of the two middle values; p90 is
		// the 4th of 4 (nearest rank), never an interpolation.
		{"even", []float64{4, 1, 3, 2}, Summary{N: 4, Median: msD(2.5), Mean: msD(2.5), P90: msD(4), CPU: msD(1.25), MaxRSS: 5 << 19, Faults: 25}},
		{"one", []float64{7}, Summary{N: 1, Median: msD(7), Mean: msD(7), P90: msD(7), CPU: msD(3.5), MaxRSS: 1 << 20, Faults: 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mk(tc.walls...)
			orig := slices.Clone(s)
			if got := Summarize(s); got != tc.want {
				t.Errorf("Summarize = %+v\nwant        %+v", got, tc.want)
			}
			if !slices.Equal(s, orig) {
				t.Error("Summarize reordered its input")
			}
		})
	}
	var ten []Sample
	for i := 1; i <= 10; i++ {
		ten = append(ten, Sample{Wall: msD(float64(i))})
	}
	if got := Summarize(ten).P90; got != msD(9) {
		t.Errorf("p90 of 1..10 ms = %v, want 9ms", got)
	}
}

func TestStat(t *testing.T) {
	s := Summary{Median: 1, Mean: 2, CPU: 3}
	for i, name := range Stats {
		if got, err := s.Stat(name); err != nil || got != time.Duration(i+1) {
			t.Errorf("Stat(%q) = %v, %v", name, got, err)
		}
	}
	if _, err := s.Stat("p99"); err == nil {
		t.Error("Stat(p99): no error")
	}
}

func TestShareAndSchedule(t *testing.T) {
	for runs := 1; runs <= 25; runs++ {
		for rounds := 1; rounds <= runs; rounds++ {
			total, lo, hi := 0, runs, 0
			for r := range rounds {
				n := Share(runs, rounds, r)
				total += n
				lo, hi = min(lo, n), max(hi, n)
			}
			if total != runs || lo < 1 || hi-lo > 1 {
				t.Fatalf("Share(%d, %d): total %d, min %d, max %d", runs, rounds, total, lo, hi)
			}
		}
	}

	const rows, rounds = 5, 40
	order := Schedule(rows, rounds, rand.New(rand.NewPCG(1, 2)))
	if len(order) != rounds {
		t.Fatalf("%d rounds, want %d", len(order), rounds)
	}
	distinct := map[string]bool{}
	first := make([]int, rows)
	for _, o := range order {
		s := slices.Sorted(slices.Values(o))
		if !slices.Equal(s, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("round %v is not every row once", o)
		}
		distinct[fmtInts(o)] = true
		first[o[0]]++
	}
	// Shuffled: the orders differ from round to round and every row gets
	// to go first.
	if len(distinct) < rounds/2 {
		t.Errorf("only %d distinct orders in %d rounds", len(distinct), rounds)
	}
	for i, n := range first {
		if n == 0 {
			t.Errorf("row %d never ran first in %d rounds", i, rounds)
		}
	}
}

func fmtInts(v []int) string {
	var b strings.Builder
	for _, i := range v {
		b.WriteByte(byte('0' + i))
	}
	return b.String()
}

func TestKnobs(t *testing.T) {
	def := Knobs{Runs: 120, Rounds: 30, Warmup: 1, Stat: "mean"}
	if got := Unset.Merge(def); got != def {
		t.Errorf("Unset.Merge = %+v, want the defaults", got)
	}
	if got := (Knobs{Runs: 4, Rounds: -1, Warmup: 0}).Merge(def); got != (Knobs{Runs: 4, Rounds: 30, Warmup: 0, Stat: "mean"}) {
		t.Errorf("Merge kept %+v (warm-up 0 is a value, not unset)", got)
	}
	if got := Unset.Merge(Knobs{Runs: 1, Rounds: 1}); got.Stat != "median" {
		t.Errorf("default stat %q, want median", got.Stat)
	}
	k := Knobs{Runs: 4, Rounds: 30, Stat: "median"}
	if err := k.Check(); err != nil || k.Rounds != 4 {
		t.Errorf("Check: %v, rounds %d, want capped at 4 runs", err, k.Rounds)
	}
	for _, bad := range []Knobs{
		{Runs: 0, Rounds: 1, Stat: "median"},
		{Runs: 1, Rounds: 0, Stat: "median"},
		{Runs: 1, Rounds: 1, Warmup: -1, Stat: "median"},
		{Runs: 1, Rounds: 1, Stat: "fastest"},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("Check(%+v): no error", bad)
		}
	}
}

func TestFormat(t *testing.T) {
	sum := func(median float64) Summary {
		return Summary{N: 3, Median: msD(median), Mean: msD(median + 0.5), P90: msD(median + 1), CPU: msD(median / 2), MaxRSS: 2 << 20, Faults: 50}
	}
	rep := &Report{
		Table: &Table{Anchors: []string{"direct", "zap-floor"}},
		Knobs: Knobs{Stat: "median"},
		Results: []Result{
			{Name: "direct", Summary: sum(1)},
			{Name: "zap-floor", Summary: sum(4)},
			{Name: "guard-plain", Summary: sum(4.2), Goal: &Goal{Anchor: "zap-floor", Max: 1.1, What: "exec <= 1.10x zap-floor"}},
			{Name: "guard-npx", Summary: sum(6), Goal: &Goal{Anchor: "zap-floor", Max: 1.25}},
			{Name: "other", Skipped: "other is not installed\nsecond line", Goal: &Goal{Anchor: "zap-floor", Max: 2}},
			{Name: "orphan", Summary: sum(1), Goal: &Goal{Anchor: "other", Max: 2}},
			{Name: "lean", Summary: sum(4.4), Goal: &Goal{Anchor: "zap-floor", Max: 1.1, MaxRSS: 3 << 20}},
			{Name: "fat", Summary: sum(4.4), Goal: &Goal{Anchor: "zap-floor", Max: 1.1, MaxRSS: 2 << 20}},
		},
		Notes: []string{"a note"},
	}
	var b bytes.Buffer
	if err := rep.Format(&b); err != nil {
		t.Fatal(err)
	}
	want := `name         median ms  mean ms  p90 ms  cpu ms  rss MB  faults  x direct  x zap-floor  goal (ratios of the median)
direct            1.00     1.50    2.00    0.50     2.0      50      1.00         0.25
zap-floor         4.00     4.50    5.00    2.00     2.0      50      4.00         1.00
guard-plain       4.20     4.70    5.20    2.10     2.0      50      4.20         1.05  PASS exec <= 1.10x zap-floor
guard-npx         6.00     6.50    7.00    3.00     2.0      50      6.00         1.50  MISS <= 1.25x zap-floor
other                -        -       -       -       -       -         -            -  skipped: other is not installed
orphan            1.00     1.50    2.00    0.50     2.0      50      1.00         0.25  - <= 2.00x other (not timed)
lean              4.40     4.90    5.40    2.20     2.0      50      4.40         1.10  PASS <= 1.10x zap-floor, rss < 3 MB
fat               4.40     4.90    5.40    2.20     2.0      50      4.40         1.10  MISS <= 1.10x zap-floor, rss < 2 MB
a note
`
	if got := b.String(); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}

	// Throughput: MB/s from the median.
	rep = &Report{
		Table:   &Table{Anchors: []string{"curl"}, Bytes: 100e6},
		Knobs:   Knobs{Stat: "mean"},
		Results: []Result{{Name: "curl", Summary: sum(99.5)}, {Name: "guard", Summary: sum(124.5), Goal: &Goal{Anchor: "curl", Max: 1.25}}},
	}
	b.Reset()
	if err := rep.Format(&b); err != nil {
		t.Fatal(err)
	}
	want = `name   median ms  mean ms  p90 ms  cpu ms  rss MB  faults  MB/s  x curl  goal (ratios of the mean)
curl       99.50   100.00  100.50   49.75     2.0      50  1005    1.00
guard     124.50   125.00  125.50   62.25     2.0      50   803    1.25  PASS <= 1.25x curl
`
	if got := b.String(); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseReport(t *testing.T) {
	status, s, err := parseReport("3 1500000 700000 2048 40 2\n")
	want := Sample{Wall: 1500 * time.Microsecond, CPU: 700 * time.Microsecond, MaxRSS: 2 << 20, Faults: 42}
	if err != nil || status != 3 || s != want {
		t.Errorf("parseReport = %d, %+v, %v", status, s, err)
	}
	for _, bad := range []string{"", "0 1 2", "x 1 2 3 4 5"} {
		if _, _, err := parseReport(bad); err == nil {
			t.Errorf("parseReport(%q): no error", bad)
		}
	}
}

func TestHealLogNote(t *testing.T) {
	dir := t.TempDir()
	if note, err := healLogNote(filepath.Join(dir, "none.log")); note != "" || err != nil {
		t.Errorf("no log: %q, %v", note, err)
	}
	log := filepath.Join(dir, "selfheal.log")
	os.WriteFile(log, []byte(`{"event":"cache.hit"}
{"event":"cache.store"}
{"event":"cache.hit"}
not json
`), 0o600)
	note, err := healLogNote(log)
	if want := "guard's heal log: 4 events (cache.hit 2, cache.store 1, unreadable 1)"; note != want || err != nil {
		t.Errorf("healLogNote = %q, %v, want %q", note, err, want)
	}
}

func TestExpand(t *testing.T) {
	s := &Sandbox{Vars: map[string]string{"HOME": "/h", "TOOLS": "/t"}}
	if got := s.Expand(`$HOME/x ${TOOLS}/y $PPID`); got != `/h/x /t/y ${PPID}` {
		t.Errorf("Expand = %q", got)
	}
}

func TestShellJoin(t *testing.T) {
	got := builds.QuoteArgv([]string{"test", "-run", "^$", "-bench", "Quick|Sum", "it's", "./x/"})
	if want := `test -run '^$' -bench 'Quick|Sum' 'it'\''s' ./x/`; got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}

// TestWriteAll: the hand-written top of the document survives, the rest
// is replaced; a file without the marker is never overwritten; a failing
// section is shown and reported, and the others still run.
func TestWriteAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	top := "# Benchmarks\n\nHand-written summary.\n\n" + Marker + "\n"
	os.WriteFile(path, []byte(top+"\nold figures\n"), 0o644)
	secs := []section{
		{"Good", "go run ./cmd/bench good", func(w io.Writer) error { _, err := io.WriteString(w, "figures\n"); return err }},
		{"Bad", "go run ./cmd/bench bad", func(w io.Writer) error { return errors.New("no cmake") }},
	}
	err := writeAll(context.Background(), io.Discard, secs, path, nil)
	if err == nil || !strings.Contains(err.Error(), "go run ./cmd/bench bad") {
		t.Errorf("writeAll error = %v, want the failed section named", err)
	}
	data, _ := os.ReadFile(path)
	doc := string(data)
	if !strings.HasPrefix(doc, top) || strings.Contains(doc, "old figures") {
		t.Errorf("top not kept or old part not replaced:\n%s", doc)
	}
	for _, want := range []string{"\n## Good\n\n`go run ./cmd/bench good`\n\n```\nfigures\n```\n", "\n## Bad\n\n`go run ./cmd/bench bad`\n\n```\nfailed: no cmake\n```\n"} {
		if !strings.Contains(doc, want) {
			t.Errorf("document lacks %q:\n%s", want, doc)
		}
	}

	os.WriteFile(path, []byte("# Benchmarks\n\nno marker\n"), 0o644)
	if err := writeAll(context.Background(), io.Discard, secs[:1], path, nil); err == nil {
		t.Error("a file without the marker was overwritten")
	}
	if data, _ := os.ReadFile(path); string(data) != "# Benchmarks\n\nno marker\n" {
		t.Errorf("file changed: %q", data)
	}

	var out bytes.Buffer
	if err := writeAll(context.Background(), io.Discard, secs[:1], "", &out); err != nil || !strings.HasPrefix(out.String(), "# Benchmarks\n\n"+Marker+"\n") {
		t.Errorf("to stdout: %v\n%s", err, out.String())
	}
}

// TestUsage: mistakes exit 2 before anything is built or run.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"-runs", "3"},
		{"nosuch"},
		{"shim", "-stat", "fastest"},
		{"shim", "-runs", "0"},
		{"download", "-rounds", "-3"},
		{"rebuild", "-warmup", "-2"},
		{"shim", "-size", "0"},
		{"shim", "-o", "x.md"},
		{"shim", "extra"},
		{"shim", "-runs", "x"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, io.Discard, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2; stderr:\n%s", args, code, stderr.String())
		}
	}
	if code := run(context.Background(), []string{"-h"}, io.Discard, io.Discard); code != 0 {
		t.Errorf("-h exited %d", code)
	}
}

func TestSetEnv(t *testing.T) {
	env := []string{"HOME=/h", "PATH=/a", "X=1"}
	got := setEnv(env, "PATH=/b:/a")
	if want := []string{"HOME=/h", "X=1", "PATH=/b:/a"}; !slices.Equal(got, want) {
		t.Errorf("setEnv replaced: %q, want %q", got, want)
	}
	if got := setEnv(env, "NEW=2"); len(got) != 4 || got[3] != "NEW=2" {
		t.Errorf("setEnv added: %q", got)
	}
	if env[1] != "PATH=/a" {
		t.Error("setEnv changed its input")
	}
}

func TestLastCause(t *testing.T) {
	out := "go: example.com/x/cmd/x@latest: module example.com/x/cmd/x: reading https://registry.example/example.com/x/@v/list: 403 Forbidden\n\tserver response: not available.\n"
	if got, want := lastCause(out), "the module proxy answered 403 Forbidden"; got != want {
		t.Errorf("lastCause = %q, want %q", got, want)
	}
}
