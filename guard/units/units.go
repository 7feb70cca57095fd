// Package units words sizes, rates and counts for people, one way
// everywhere guard speaks: sizes in one unit family, the binary one
// (B, KiB, MiB, GiB, TiB; 1 KiB = 1024 bytes), the family the heal plan,
// the progress lines, the stash and status all use, and counts with the
// plural only past one ("1 file", "3 files"). docs/exit-status-and-events.md
// ("Sizes and counts") is the rule. It also says an error, or what a
// build's output or a log said last, in one line (lines.go).
package units

import (
	"fmt"
	"strconv"
)

var suffixes = []string{"KiB", "MiB", "GiB", "TiB"}

// scale is the unit n is best written in: 0 for bytes, else the index+1
// into suffixes, and n divided down to it.
func scale(n int64) (float64, int) {
	v, i := float64(n), 0
	for i < len(suffixes) && (v >= 1024 || v <= -1024) {
		v /= 1024
		i++
	}
	return v, i
}

// Bytes writes n bytes: "512 B", "4.0 KiB", "400.6 MiB", "2.3 GiB".
func Bytes(n int64) string {
	v, i := scale(n)
	if i == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	return fmt.Sprintf("%.1f %s", v, suffixes[i-1])
}

// Of writes done out of total in total's unit: "210.0/461.8 MiB".
func Of(done, total int64) string {
	_, i := scale(total)
	if i == 0 {
		return fmt.Sprintf("%d/%d B", done, total)
	}
	div := float64(int64(1) << (10 * i))
	return fmt.Sprintf("%.1f/%.1f %s", float64(done)/div, float64(total)/div, suffixes[i-1])
}

// Rate writes a byte rate: "12.3 MiB/s", "800 B/s".
func Rate(bytesPerSecond float64) string {
	return Bytes(int64(bytesPerSecond)) + "/s"
}

// Count writes n with its noun: "1 file", "0 files", "3 files". many is
// the plural, given because English plurals are not all an added s
// ("1 library", "2 libraries"; "1 entry", "4 entries").
func Count[N ~int | ~int64](n N, one, many string) string {
	if n == 1 || n == -1 {
		return strconv.FormatInt(int64(n), 10) + " " + one
	}
	return strconv.FormatInt(int64(n), 10) + " " + many
}
