package runner

import (
	"io"
	"os"
	"time"
)

// Spec describes one supervised run of a real tool.
type Spec struct {
	Path  string   // resolved real binary
	Argv  []string // full argv including argv[0], the name the caller typed; empty means Path alone
	Env   []string // nil means guard's own environment
	Dir   string   // "" inherits guard's
	Stdin *os.File // usually os.Stdin; nil gives the child no input (end of file at once)
	// Stdout is where the child's stdout goes live; nil keeps it only in
	// Result.Stdout (with Capture) and counts it. When nothing needs to
	// read the output (no Capture, no watchdog) and Stdout is an *os.File,
	// the child writes to that file itself: a person at a terminal gets
	// the terminal, and guard does no work per byte.
	Stdout io.Writer
	// Stderr is where the child's stderr goes (usually os.Stderr); nil drops
	// it. It is observed when a watchdog is on, and like Stdout handed to
	// the child as it is otherwise. Under a pty the child has one terminal
	// for both, and all of it goes to Stdout.
	Stderr io.Writer
	// Capture keeps a copy of stdout in Result.Stdout: the first
	// CaptureMemory bytes in memory and, with SpillDir, the rest in a
	// private temp file below SpillDir; without it only the first
	// CaptureMemory bytes are kept (and all are counted).
	Capture  bool
	SpillDir string

	// Budget ends the run like a timeout when it expires: SIGTERM to the
	// group, SIGKILL after Grace. 0 is no budget.
	Budget time.Duration
	// Stall ends the run when the output has not progressed (see
	// outputMeter) for this long. 0 is off.
	Stall time.Duration
	// Grace is the time between SIGTERM and SIGKILL; 0 means DefaultGrace.
	Grace time.Duration

	// Prompts is the prompt watchdog's policy. PromptsAnswer and
	// PromptsYes give the child a pipe (or the pty) that guard writes to,
	// with Stdin copied into it; with a nil Stdin that input ends at once,
	// so no answer can be given and every question ends the run.
	Prompts Policy
	// PromptQuiet is how long the output must be quiet before guard asks
	// the kernel whether the tool waits for input; 0 means
	// DefaultPromptQuiet.
	PromptQuiet time.Duration

	// PTY runs the child under a pseudo-terminal, so that it still sees a
	// terminal while its output is watched. The caller sets it when guard's
	// own stdout is a terminal.
	PTY bool
}

// Defaults for the zero values of Spec.
const (
	DefaultGrace       = 3 * time.Second
	DefaultPromptQuiet = time.Second
)

// drainDelay bounds the wait for output after the child has exited: a
// process that left the group (setsid) may hold the pipe or the terminal
// open forever, and it must not hold the call with it.
const drainDelay = time.Second

// watched reports whether a watchdog reads the output.
func (s Spec) watched() bool { return s.Stall > 0 || s.Prompts != PromptsOff }

func (s Spec) withDefaults() Spec {
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.PromptQuiet <= 0 {
		s.PromptQuiet = DefaultPromptQuiet
	}
	if len(s.Argv) == 0 {
		s.Argv = []string{s.Path}
	}
	return s
}

// tick is how often the watchdogs look at the output: often enough to act
// within a small fraction of their periods, rarely enough to cost nothing.
// 0 means no watchdog is on.
func (s Spec) tick() time.Duration {
	var d time.Duration
	if s.Stall > 0 {
		d = s.Stall
	}
	if s.Prompts != PromptsOff && (d == 0 || s.PromptQuiet < d) {
		d = s.PromptQuiet
	}
	if d == 0 {
		return 0
	}
	return min(max(d/8, 5*time.Millisecond), 250*time.Millisecond)
}
