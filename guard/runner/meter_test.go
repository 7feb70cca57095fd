package runner

import (
	"strings"
	"testing"
)

func TestOutputMeter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string // fed in order
		want   []bool   // progress per write
	}{
		{"text", []string{"hello"}, []bool{true}},
		{"newline", []string{"a", "\n", "\n"}, []bool{true, true, true}},
		{"appended text", []string{"Downloading", "...", "."}, []bool{true, true, true}},
		{"spinner with carriage return", []string{"\r|", "\r/", "\r-", "\r\\"}, []bool{true, false, false, false}},
		{"redraw same length", []string{"\r 10% ", "\r 20% ", "\r 30% "}, []bool{true, false, false}},
		{"redraw grows", []string{"\r9 MB", "\r10 MB"}, []bool{true, true}},
		{"backspace spinner", []string{"|", "\b/", "\b-"}, []bool{true, false, false}},
		{"colour codes are not text", []string{"ab", "\x1b[32m\x1b[0m", "\x1b[1;31m"}, []bool{true, false, false}},
		{"cursor to column 1", []string{"⠋ installing", "\x1b[1G⠙ installing", "\x1b[G⠹ installing"}, []bool{true, false, false}},
		{"erase line and redraw", []string{"working", "\x1b[2K\rworking", "\x1b[0K\rworking"}, []bool{true, false, false}},
		{"cursor back", []string{"abc", "\x1b[3Dabc"}, []bool{true, false}},
		{"cursor forward is a move", []string{"\x1b[5C"}, []bool{false}},
		{"title set by OSC", []string{"\x1b]0;npm install\x07", "\x1b]0;npm install 2\x1b\\"}, []bool{false, false}},
		{"sequence split across writes", []string{"ab", "\x1b[", "2K\r", "ab"}, []bool{true, false, false, false}},
		{"multi-line redraw", []string{"one\ntwo\n", "\x1b[2A\x1b[2Kone\n\x1b[2Ktwo\n"}, []bool{true, false}},
		{"text after redraw block", []string{"one\n", "\x1b[1Aone\n", "three"}, []bool{true, false, true}},
		{"utf-8 counts columns once", []string{"é", "\ré"}, []bool{true, false}},
		{"control bytes", []string{"\x07\x00"}, []bool{false}},
	} {
		var m outputMeter
		for i, w := range tc.writes {
			if got := m.feed([]byte(w)); got != tc.want[i] {
				t.Errorf("%s: write %d %q: progress %v, want %v", tc.name, i, w, got, tc.want[i])
			}
		}
	}
}

func FuzzOutputMeter(f *testing.F) {
	f.Add([]byte("\x1b[12;40H\x1b]8;;x\x1b\\\r\n\b\t"))
	f.Fuzz(func(t *testing.T, p []byte) {
		var m outputMeter
		m.feed(p) // must not panic on any input
	})
}

// feed's shortcuts (plain lines, text runs) must leave the meter exactly
// where stepping through every byte would, with the same verdict.
func FuzzMeterShortcutMatchesSteps(f *testing.F) {
	f.Add([]byte("one\ntwo\r\nthr"), []byte("ee\n\x1b[1A\n"), []byte("x\b\tyz\n"))
	f.Add([]byte("\x1b[2A"), []byte("a\nb\n"), []byte("c"))
	f.Add([]byte("é\x00\x7f\x1b]0;t\x07"), []byte("\x1b[3Dab\x1bMc"), []byte("\x1b(B✓\n"))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		var fast, slow outputMeter
		for i, p := range [][]byte{a, b, c} {
			got, want := fast.feed(p), false
			for _, x := range p {
				if slow.step(x) {
					want = true
				}
			}
			if got != want || fast != slow {
				t.Fatalf("write %d %q: feed %v %+v, steps %v %+v", i, p, got, fast, want, slow)
			}
		}
	})
}

// BenchmarkMeterPlainLines is the stall watchdog's cost on ordinary output.
func BenchmarkMeterPlainLines(b *testing.B) {
	chunk := []byte(strings.Repeat("a line of plain output, as a build prints it\n", 700))
	b.SetBytes(int64(len(chunk)))
	var m outputMeter
	for b.Loop() {
		m.feed(chunk)
	}
}

// BenchmarkMeterColouredLines is the watchdog's cost on output with
// colour codes on every line: the byte-by-byte path.
func BenchmarkMeterColouredLines(b *testing.B) {
	chunk := []byte(strings.Repeat("\x1b[32m✓\x1b[0m compiled src/some/file.c into an object, as a build says\n", 500))
	b.SetBytes(int64(len(chunk)))
	var m outputMeter
	for b.Loop() {
		m.feed(chunk)
	}
}
