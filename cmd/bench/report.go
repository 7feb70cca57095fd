package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Format writes the report as an aligned text table: one line a row, the
// anchors' ratio columns, each goal's verdict, then the notes.
func (rep *Report) Format(w io.Writer) error {
	head := []string{"name", "median ms", "mean ms", "p90 ms", "cpu ms", "rss MB", "faults"}
	if rep.Table.Bytes > 0 {
		head = append(head, "MB/s")
	}
	for _, a := range rep.Table.Anchors {
		head = append(head, "x "+a)
	}
	head = append(head, "goal (ratios of the "+rep.Knobs.Stat+")")
	lines := [][]string{head}
	for _, r := range rep.Results {
		line := []string{r.Name}
		if r.Skipped != "" {
			for range len(head) - 2 {
				line = append(line, "-")
			}
			reason, _, _ := strings.Cut(r.Skipped, "\n")
			lines = append(lines, append(line, "skipped: "+reason))
			continue
		}
		s := r.Summary
		line = append(line, ms(s.Median), ms(s.Mean), ms(s.P90), ms(s.CPU),
			fmt.Sprintf("%.1f", float64(s.MaxRSS)/(1<<20)), fmt.Sprint(s.Faults))
		if b := rep.Table.Bytes; b > 0 {
			line = append(line, fmt.Sprintf("%.0f", float64(b)/s.Median.Seconds()/1e6))
		}
		for _, a := range rep.Table.Anchors {
			if x, ok := rep.Ratio(r.Name, a); ok {
				line = append(line, fmt.Sprintf("%.2f", x))
			} else {
				line = append(line, "-")
			}
		}
		lines = append(lines, append(line, rep.Verdict(r)))
	}
	if err := writeAligned(w, lines); err != nil {
		return err
	}
	for _, n := range rep.Notes {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}

// Ratio is row's statistic over anchor's; false when either was not timed.
func (rep *Report) Ratio(row, anchor string) (float64, bool) {
	a, ok := rep.stat(row)
	b, bok := rep.stat(anchor)
	if !ok || !bok || b == 0 {
		return 0, false
	}
	return float64(a) / float64(b), true
}

// stat is the row's figure that ratios compare; false when it was not timed.
func (rep *Report) stat(name string) (time.Duration, bool) {
	for _, r := range rep.Results {
		if r.Name == name && r.Skipped == "" && r.Summary.N > 0 {
			v, err := r.Summary.Stat(rep.Knobs.Stat)
			return v, err == nil
		}
	}
	return 0, false
}

// Verdict is "PASS goal", "MISS goal", "- goal" (its anchor was not
// timed), or "" for a row with no goal.
func (rep *Report) Verdict(r Result) string {
	if r.Goal == nil {
		return ""
	}
	pass := true
	for g := r.Goal; g != nil; g = g.And {
		x, ok := rep.Ratio(r.Name, g.Anchor)
		if !ok {
			return "- " + r.Goal.String() + " (not timed)"
		}
		pass = pass && x <= g.Max && (g.MaxRSS == 0 || r.Summary.MaxRSS < g.MaxRSS)
	}
	if pass {
		return "PASS " + r.Goal.String()
	}
	return "MISS " + r.Goal.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// writeAligned pads the columns: the first and last left-aligned (names,
// verdicts), the figures between right-aligned; no trailing blanks.
func writeAligned(w io.Writer, lines [][]string) error {
	var width []int
	for _, l := range lines {
		for i, c := range l {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	for _, l := range lines {
		var b strings.Builder
		for i, c := range l {
			switch {
			case i == 0:
				fmt.Fprintf(&b, "%-*s", width[i], c)
			case i == len(width)-1:
				b.WriteString("  " + c)
			default:
				fmt.Fprintf(&b, "  %*s", width[i], c)
			}
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(b.String(), " ")); err != nil {
			return err
		}
	}
	return nil
}
