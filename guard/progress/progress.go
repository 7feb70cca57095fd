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
)

// DefaultEvery is how often a line is printed when stderr is not a
// terminal; GUARD_PROGRESS_EVERY, read by the caller, may ask for another.
const DefaultEvery = 5 * time.Second

// Reporter shows the progress of one long task until Stop.
type Reporter struct {
	w     io.Writer
	tty   bool
	label string
	total int64 // bytes expected; <= 0 for a task measured in steps, not bytes

	mu      sync.Mutex
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

// Start begins reporting label to w. total is the byte count expected, or 0
// for a task reported by SetStatus lines. every is how often a line is
// printed when w is not a terminal (0: DefaultEvery); a terminal gets a
// bar redrawn five times a second.
func Start(w io.Writer, label string, total int64, every time.Duration) *Reporter {
	r := &Reporter{w: w, tty: IsTerminal(w), label: label, total: total, start: time.Now(), stop: make(chan struct{})}
	if every <= 0 {
		every = DefaultEvery
	}
	if r.tty {
		every = 200 * time.Millisecond
	}
	r.wg.Add(1)
	go r.loop(every)
	return r
}

// SetBase starts an attempt at n bytes that were already there (a resumed
// download): the rate and the ETA count only what this attempt fetched in
// its own time, and a Wait ends.
func (r *Reporter) SetBase(n int64) {
	r.mu.Lock()
	r.base, r.done = n, n
	r.start, r.waiting = time.Now(), ""
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
// last build line).
func (r *Reporter) SetStatus(s string) {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r", ""))
	r.mu.Lock()
	r.status = s
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

func (r *Reporter) loop(every time.Duration) {
	defer r.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
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
// "guard: downloading qwen.gguf  45% 210.0/484.2 MB 12.3 MB/s eta 22s".
func (r *Reporter) Line() string {
	r.mu.Lock()
	done, base, status, total, start, waiting := r.done, r.base, r.status, r.total, r.start, r.waiting
	r.mu.Unlock()
	if waiting != "" {
		status = waiting
	}
	elapsed := time.Since(start)
	var b strings.Builder
	fmt.Fprintf(&b, "guard: %s", r.label)
	if total > 0 {
		// While waiting there is no bar, rate or ETA: only where it stands.
		pct := float64(done) * 100 / float64(total)
		if r.tty && waiting == "" {
			b.WriteString(" " + bar(pct, 20))
		}
		fmt.Fprintf(&b, " %3.0f%% %.1f/%.1f MB", pct, mb(done), mb(total))
		if waiting == "" {
			rate := float64(done-base) / elapsed.Seconds()
			fmt.Fprintf(&b, " %.1f MB/s", rate/1e6)
			if rate > 0 && done < total {
				eta := time.Duration(float64(total-done) / rate * float64(time.Second))
				fmt.Fprintf(&b, " eta %s", eta.Round(time.Second))
			}
		}
	} else {
		fmt.Fprintf(&b, " (%s)", elapsed.Round(time.Second))
	}
	if status != "" {
		b.WriteString(": " + status)
	}
	return b.String()
}

func mb(n int64) float64 { return float64(n) / 1e6 }

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
