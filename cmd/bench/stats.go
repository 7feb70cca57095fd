package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Sample is one timed run of a row's command.
type Sample struct {
	Wall   time.Duration
	CPU    time.Duration // user + system of the child and the children it waited for
	MaxRSS int64         // bytes, the high-water mark across exec and waited-for children
	Faults int64         // minor + major page faults
}

// Summary condenses a row's samples. Medians and the 90th percentile are
// nearest to what a script sees on a shared machine, where a few samples
// always catch another engineer's build; the mean is kept to show that tail.
type Summary struct {
	N                 int
	Median, Mean, P90 time.Duration
	CPU               time.Duration // mean
	MaxRSS            int64         // median
	Faults            int64         // median: they do not move with load, so any sample would do
}

// Stats are the figures ratios and goals can compare (the -stat flag).
var Stats = []string{"median", "mean", "cpu"}

// Summarize returns the summary of samples (zero for none).
func Summarize(samples []Sample) Summary {
	n := len(samples)
	if n == 0 {
		return Summary{}
	}
	wall := make([]time.Duration, n)
	rss := make([]int64, n)
	faults := make([]int64, n)
	var sum, cpu time.Duration
	for i, s := range samples {
		wall[i], rss[i], faults[i] = s.Wall, s.MaxRSS, s.Faults
		sum += s.Wall
		cpu += s.CPU
	}
	slices.Sort(wall)
	return Summary{
		N:      n,
		Median: median(wall),
		Mean:   sum / time.Duration(n),
		P90:    percentile(wall, 90),
		CPU:    cpu / time.Duration(n),
		MaxRSS: median(rss),
		Faults: median(faults),
	}
}

// Stat returns the figure named by stat (one of Stats).
func (s Summary) Stat(stat string) (time.Duration, error) {
	switch stat {
	case "median":
		return s.Median, nil
	case "mean":
		return s.Mean, nil
	case "cpu":
		return s.CPU, nil
	}
	return 0, fmt.Errorf("unknown statistic %q (want one of %v)", stat, Stats)
}

// median of a non-empty slice; it sorts a copy, so callers may pass
// unsorted data.
func median[T int64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile is the nearest-rank percentile p (1..100) of sorted, non-empty
// data: a value that was really measured, never an interpolation.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// Schedule returns, for each of rounds rounds, the order in which the rows
// 0..rows-1 run: every row once a round, in a fresh random order. Running
// every row in every round spreads a change of machine load over all rows
// alike; shuffling keeps a row from always following the same neighbour
// (whose page-cache and CPU-cache footprint it would inherit).
func Schedule(rows, rounds int, rng *rand.Rand) [][]int {
	order := make([][]int, rounds)
	for r := range order {
		order[r] = rng.Perm(rows)
	}
	return order
}

// Share is how many of runs samples a row takes in round (0-based) of
// rounds: runs split as evenly as possible, the first rounds taking the
// remainder, so every row gets exactly runs samples.
func Share(runs, rounds, round int) int {
	n := runs / rounds
	if round < runs%rounds {
		n++
	}
	return n
}
