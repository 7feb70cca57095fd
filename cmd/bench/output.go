package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// outputGoal: a supervised tool's output to a pipe within 1.5x of a bash
// exec shim's, in under outputRSS of memory.
const (
	outputGoal = 1.5
	outputRSS  = 30 << 20
)

// outputTable times a tool printing sizeMB to a pipe the harness drains,
// as a script's $(...) would: directly, through a bash exec shim, and
// through guard, with only a budget (the tool writes to guard's own
// stdout), with a stall watchdog (guard reads and meters every byte), and
// as a llama call with a fallback (guard holds the answer until the
// attempt proved good: past 4 MiB in a temp file). The rss column is the
// figure for memory.
func outputTable(sizeMB int) *Table {
	size := int64(sizeMB) << 20
	return &Table{
		Name:    "output",
		Title:   fmt.Sprintf("Output: a tool printing %d MB to a pipe, through guard against a direct exec and a bash exec shim (goal: supervised within %.1fx of the bash shim, under 30 MB)", sizeMB, outputGoal),
		Anchors: []string{"direct", "bash-shim"},
		Bytes:   size,
		Knobs:   Knobs{Runs: 10, Rounds: 5, Warmup: 1, Stat: "median"},
		Setup:   func(s *Sandbox) error { return outputSetup(s, size) },
		Rows: []Row{
			{Name: "direct", Argv: []string{"$TOOLS/printer"}, Pipe: true},
			{Name: "bash-shim", Setup: printerBashShim, Argv: []string{"$TMP/bash-shim"}, Pipe: true},
			// A budget only: the tool gets guard's stdout.
			{
				Name: "guard-supervised", Setup: guardInstalled, Argv: []string{"$SHIM_DIR/printer"}, Pipe: true,
				Goal: &Goal{Anchor: "bash-shim", Max: outputGoal, MaxRSS: outputRSS},
			},
			// A stall watchdog: every byte goes through guard and its meter.
			{Name: "guard-watched", Setup: guardInstalled, Argv: []string{"$SHIM_DIR/watched"}, Pipe: true},
			// A llama call with a fallback: the answer is held until good.
			{
				Name: "guard-llama-fallback", Setup: guardInstalled, Pipe: true,
				Argv: []string{"$SHIM_DIR/llama-completion", "-m", "$HOME/m.gguf", "-p", "hi", "-n", "4"},
			},
		},
	}
}

// outputSetup writes the printer as the real binary of every row, and the
// manifest naming it. The printer is dd from /dev/zero in 1 MiB writes: one
// process, steady, so the rows differ by what is in front of it alone. The
// llama row's printer ends with the blank line llama-completion writes
// last, so that its answer is whole (guard retries and falls back from one
// cut short) and the row times one attempt.
// Zero bytes are the stall meter's slow case (no newline: every byte is
// looked at), so the watched row is an upper bound; the meter's figures
// for text lines are its Go benchmarks (./guard/runner, Meter).
func outputSetup(s *Sandbox, size int64) error {
	printer := fmt.Sprintf("#!/bin/sh\nexec dd if=/dev/zero bs=1048576 count=%d status=none\n", size>>20)
	llama := fmt.Sprintf("#!/bin/sh\ndd if=/dev/zero bs=1048576 count=%d status=none && printf '\\n\\n'\n", size>>20)
	tools := s.Vars["TOOLS"]
	if err := s.WriteFile("$TOOLS/printer", printer, 0o755); err != nil {
		return err
	}
	bin := s.Expand("$HOME/llama.cpp/build/bin")
	if err := s.WriteFile(filepath.Join(bin, "llama-completion"), llama, 0o755); err != nil {
		return err
	}
	if err := os.Link(filepath.Join(bin, "llama-completion"), filepath.Join(bin, "llama-simple")); err != nil {
		return err
	}
	if err := os.Link(filepath.Join(tools, "printer"), filepath.Join(tools, "watched")); err != nil {
		return err
	}
	if err := s.WriteFile("$HOME/m.gguf", "GGUF\x03\x00\x00\x00", 0o644); err != nil {
		return err
	}
	def, err := os.ReadFile(filepath.Join(s.Vars["REPO"], "manifest", "default.toml"))
	if err != nil {
		return err
	}
	return s.WriteFile("$GUARD_MANIFEST", string(def)+`
[tools.printer]
timeout = "120s"

[tools.watched]
timeout = "120s"
stall = "60s"
`, 0o644)
}

func printerBashShim(s *Sandbox, _ *Row) error {
	if _, err := os.Stat("/bin/bash"); err != nil {
		return err
	}
	return s.WriteFile("$TMP/bash-shim", "#!/bin/bash\nexec "+shellQuote(s.Expand("$TOOLS/printer"))+" \"$@\"\n", 0o755)
}
