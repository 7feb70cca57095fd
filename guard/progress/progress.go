// Package progress tells a person on stderr that a long heal is alive:
// downloads, builds and lock waits. On a terminal it redraws one line
// (a bar when the total is known); otherwise it prints a plain line every
// few seconds, so an agent harness reading a pipe sees life without a flood.
// It never writes to stdout, which belongs to the tool.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/sandbox-guard/guard/guard/units"
)

// DefaultEvery is how often a line is printed when stderr is not a
// terminal; GUARD_PROGRESS_EVERY, read by the caller, may ask for another.
// Half a minute keeps a call that waits minutes on a build to a few lines
// of an agent's context.
const DefaultEvery = 30 * time.Second

// Reporter shows the progress of one long task until Stop.
type Reporter struct {
	w     io.Writer
	tty   bool
	label string
	total int64 // bytes expected; <= 0 for a task measured in steps, not bytes
	now   func() time.Time

	mu      sync.Mutex
	percent float64       // a step task's own percent (SetStatus reads it); -1 unknown
	expect  time.Duration // a step task's expected length (the recipe's last build); 0 unknown
	shown   *Snapshot     // a task followed from elsewhere (Show): the line shows this
	marks   []mark        // a download's progress at recent snapshots (recentRate)
	done    int64
	base    int64 // bytes already there when this attempt started (a resumed partial)
	status  string
	waiting string    // why nothing moves between attempts (a retry back-off)
	start   time.Time // of this attempt: the rate counts only its own time
	stop    chan struct{}
	wg      sync.WaitGroup
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Pace is how a Reporter speaks when no one watches a terminal: a line
// every Every (0: DefaultEvery), or, when Observe is set, each snapshot
// handed to Observe once a second instead of any line. A detached heal (one
// process, one heal) sets Observe: its progress is its job record, and the
// call that waits on it draws the line. It is a value its owner passes
// down (the engine to its healers, a healer to its downloads), so two
// heals in one process never share it.
type Pace struct {
	Every   time.Duration
	Observe func(Snapshot)
}

// Start begins reporting label to w at pace. total is the byte count
// expected, or 0 for a task reported by SetStatus lines. A terminal gets a
// bar redrawn five times a second.
func Start(w io.Writer, label string, total int64, pace Pace) *Reporter {
	tty := IsTerminal(w)
	every := pace.Every
	switch {
	case pace.Observe != nil:
		every = time.Second // a detached heal's record: fresh for the call that reads it
	case tty:
		every = 200 * time.Millisecond
	case every <= 0:
		every = DefaultEvery
	}
	t := time.NewTicker(every)
	r := start(w, tty, label, total, timing{t.C, time.Now}, pace.Observe)
	go func() { r.wg.Wait(); t.Stop() }()
	return r
}

// timing is the clock a Reporter runs on: a line (or a snapshot) at each
// tick, the elapsed time and the ETA from now. Tests move their own.
type timing struct {
	tick <-chan time.Time
	now  func() time.Time
}

// start is Start on a clock of the caller's: a line at each tick, or a
// snapshot to observe when it is set.
func start(w io.Writer, tty bool, label string, total int64, clock timing, observe func(Snapshot)) *Reporter {
	r := &Reporter{w: w, tty: tty, label: label, total: total, now: clock.now, start: clock.now(), percent: -1, stop: make(chan struct{})}
	r.wg.Add(1)
	go r.loop(clock.tick, observe)
	return r
}

// SetBase starts an attempt at n bytes that were already there (a resumed
// download): the rate and the ETA count only what this attempt fetched in
// its own time, and a Wait ends.
func (r *Reporter) SetBase(n int64) {
	r.mu.Lock()
	r.base, r.done = n, n
	r.start, r.waiting, r.marks = r.now(), "", nil
	r.mu.Unlock()
}

// Wait says why nothing moves until the next SetBase (a retry back-off):
// the line shows it instead of a rate and an ETA that would climb.
func (r *Reporter) Wait(why string) {
	r.mu.Lock()
	r.waiting = why
	r.mu.Unlock()
}

// Add counts n more bytes done.
func (r *Reporter) Add(n int64) {
	r.mu.Lock()
	r.done += n
	r.mu.Unlock()
}

// Write counts len(p) bytes, so a Reporter can sit in an io.MultiWriter.
func (r *Reporter) Write(p []byte) (int, error) {
	r.Add(int64(len(p)))
	return len(p), nil
}

// SetStatus replaces the free text shown after the label (a build step, the
// last build line). A build tool's own percent in it (ParsePercent) becomes
// the task's when it is past the task's: CMake's percent is per target and
// starts again low for the next one, and the task's percent only moves
// forward.
func (r *Reporter) SetStatus(s string) {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r", ""))
	pct, ok := ParsePercent(s)
	r.mu.Lock()
	r.status = s
	if ok && pct > r.percent {
		r.percent = pct
	}
	r.mu.Unlock()
}

// Expect gives a step task its expected length, the recipe's last good
// build here: the time left is that build's share still to do.
func (r *Reporter) Expect(d time.Duration) {
	r.mu.Lock()
	r.expect = d
	r.mu.Unlock()
}

// Show makes the line show s: a task that runs elsewhere (a detached
// heal, read from its job record) and is followed here.
func (r *Reporter) Show(s Snapshot) {
	r.mu.Lock()
	r.shown = &s
	r.mu.Unlock()
}

// Stop ends the reporter and prints final as the last line (if not empty).
func (r *Reporter) Stop(final string) {
	select {
	case <-r.stop:
		return
	default:
	}
	close(r.stop)
	r.wg.Wait()
	if r.tty {
		fmt.Fprint(r.w, "\r\x1b[K")
	}
	if final != "" {
		fmt.Fprintln(r.w, final)
	}
}

func (r *Reporter) loop(tick <-chan time.Time, observe func(Snapshot)) {
	defer r.wg.Done()
	if observe != nil {
		// The last word of a stopped reporter: its phase is over, so the
		// record says no phase until the next reporter's first tick (a
		// restore that found nothing must not read as restoring while
		// the build after it runs).
		defer func() {
			s := r.Snapshot()
			s.Status = ""
			observe(s)
		}()
	}
	for {
		select {
		case <-r.stop:
			return
		case <-tick:
			if observe != nil {
				// A detached heal: its job record is the progress, and the
				// call that follows it draws the line.
				observe(r.Snapshot())
				continue
			}
			line := r.Line()
			if r.tty {
				fmt.Fprint(r.w, "\r\x1b[K"+clip(line, 120))
			} else {
				fmt.Fprintln(r.w, line)
			}
		}
	}
}

// Line is the current progress line, e.g.
// "guard: downloading qwen.gguf  45% 210.0/461.8 MiB 12.3 MiB/s eta 22s".
func (r *Reporter) Line() string {
	r.mu.Lock()
	done, base, status, total, start, waiting, shown := r.done, r.base, r.status, r.total, r.start, r.waiting, r.shown
	r.mu.Unlock()
	if shown != nil {
		return r.stepLine(*shown)
	}
	if total <= 0 {
		return r.stepLine(r.Snapshot())
	}
	if waiting != "" {
		status = waiting
	}
	elapsed := r.now().Sub(start)
	var b strings.Builder
	fmt.Fprintf(&b, "guard: %s", r.label)
	// While waiting there is no bar, rate or ETA: only where it stands.
	pct := float64(done) * 100 / float64(total)
	if r.tty && waiting == "" {
		b.WriteString(" " + bar(pct, 20))
	}
	fmt.Fprintf(&b, " %3.0f%% %s", pct, units.Of(done, total))
	if waiting == "" {
		rate := float64(done-base) / elapsed.Seconds()
		b.WriteString(" " + units.Rate(rate))
		if rate > 0 && done < total {
			eta := time.Duration(float64(total-done) / rate * float64(time.Second))
			fmt.Fprintf(&b, " eta %s", eta.Round(time.Second))
		}
	}
	if status != "" {
		b.WriteString(": " + status)
	}
	return b.String()
}

// stepLine is the line of a task measured in steps, or followed from a
// job record: "guard: building demo [====      ]  46%, about 6s left (12s): make: [ 46%] ...";
// the bar only on a terminal, the percent and the time left when known.
func (r *Reporter) stepLine(s Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "guard: %s", r.label)
	if s.Percent >= 0 {
		if r.tty {
			b.WriteString(" " + bar(s.Percent, 20))
		}
		fmt.Fprintf(&b, " %3.0f%%", s.Percent)
	}
	if s.Over > 0 {
		fmt.Fprintf(&b, ", past the %s expected", roundLeft(s.Over))
	}
	if s.Left >= 0 {
		fmt.Fprintf(&b, ", about %s left", roundLeft(s.Left))
		if s.Estimated {
			b.WriteString(" (estimated from its rate so far)")
		}
	}
	fmt.Fprintf(&b, " (%s)", r.now().Sub(r.start).Round(time.Second))
	if s.Status != "" {
		b.WriteString(": " + s.Status)
	}
	return b.String()
}

// roundLeft rounds a time left to what an estimate can tell.
func roundLeft(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(10 * time.Second)
	}
	return d.Round(time.Second)
}

func bar(pct float64, width int) string {
	n := int(pct / 100 * float64(width))
	n = max(0, min(width, n))
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "]"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 1
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut-- // never half a character: a terminal would show garbage
	}
	return s[:cut] + "…"
}
