package runner

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// stream names one of the child's output streams. Under a pty there is only
// one: everything arrives as outStream.
type stream int

const (
	outStream stream = iota
	errStream
	numStreams
)

// tailSize bounds what is kept of each stream for prompt detection: a prompt
// is one line, and a longer unfinished line is not a question anyone reads.
const tailSize = 1024

// watcher sees every byte the child writes on the streams guard reads, on
// any goroutine, and keeps what the watchdogs and the Result need: when
// output last came, when it last made progress, the end of each stream, and
// the captured stdout.
type watcher struct {
	mu           sync.Mutex
	lastOutput   time.Time
	lastProgress time.Time
	last         stream
	streams      [numStreams]streamState
	meter        bool    // the stall watchdog is on: meter progress
	out          *Output // captured stdout; nil without Capture
}

type streamState struct {
	meter      outputMeter
	tail       []byte
	n          int64 // bytes seen on this stream
	answeredAt int64 // n when a prompt on this stream was last answered
}

func newWatcher(began time.Time, s Spec) *watcher {
	w := &watcher{lastOutput: began, lastProgress: began, meter: s.Stall > 0}
	if s.Capture {
		w.out = newOutput(s.SpillDir)
	}
	for i := range w.streams {
		w.streams[i].answeredAt = -1
	}
	return w
}

func (w *watcher) observe(st stream, p []byte) {
	if len(p) == 0 {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := &w.streams[st]
	s.n += int64(len(p))
	w.last = st
	w.lastOutput = now
	if !w.meter || s.meter.feed(p) {
		w.lastProgress = now
	}
	s.tail = appendTail(s.tail, p)
	if st == outStream && w.out != nil {
		_, _ = w.out.Write(p)
	}
}

func appendTail(tail, p []byte) []byte {
	if len(p) >= tailSize {
		return append(tail[:0], p[len(p)-tailSize:]...)
	}
	if over := len(tail) + len(p) - tailSize; over > 0 {
		tail = append(tail[:0], tail[over:]...)
	}
	return append(tail, p...)
}

// sinceProgress reports how long the output has not advanced.
func (w *watcher) sinceProgress(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return now.Sub(w.lastProgress)
}

// paused moves the clocks on by d, the time guard and the tool spent
// stopped (Ctrl-Z): it was neither quiet nor stalled.
func (w *watcher) paused(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastOutput = w.lastOutput.Add(d)
	w.lastProgress = w.lastProgress.Add(d)
}

// promptFound is the unfinished line one stream ends with.
type promptFound struct {
	text   string
	kind   promptKind
	stream stream
	at     int64 // the stream's byte count when it was seen
	// linesSinceAnswer counts the lines the stream finished since guard
	// last answered on it; -1 when it never was.
	linesSinceAnswer int
	// finished: the question is the last line the tool finished (it printed
	// a newline after it), not a line it left open.
	finished bool
}

// prompt returns the unfinished line the output ends with once it has been
// quiet for quiet, the stream written last first; and once it has been
// quiet for finishedQuiet, the last line even when it was finished (a
// question printed with a newline). A line already answered is not
// returned again until that stream writes more.
func (w *watcher) prompt(now time.Time, quiet, finishedQuiet time.Duration) (promptFound, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.lastOutput) < quiet {
		return promptFound{}, false
	}
	if p, ok := w.promptIn(false); ok {
		return p, true
	}
	if now.Sub(w.lastOutput) < finishedQuiet {
		return promptFound{}, false
	}
	return w.promptIn(true)
}

// promptIn finds the question the output ends with: an unfinished line, or
// with finished the last finished one.
func (w *watcher) promptIn(finished bool) (promptFound, bool) {
	for _, st := range [...]stream{w.last, 1 - w.last} {
		s := &w.streams[st]
		if s.n == 0 || s.n == s.answeredAt {
			continue
		}
		tail := s.sinceAnswer()
		var text string
		var kind promptKind
		if finished {
			text, kind = classify(lastFinishedLine(tail))
		} else {
			text, kind = detectPrompt(tail)
		}
		if kind != noPrompt {
			lines := -1
			if s.answeredAt >= 0 {
				lines = bytes.Count(tail, []byte{'\n'})
			}
			return promptFound{text: text, kind: kind, stream: st, at: s.n, linesSinceAnswer: lines, finished: finished}, true
		}
	}
	return promptFound{}, false
}

// sinceAnswer is the tail after the last answer. A pipe does not echo the
// answer the way a terminal would, so the next question would otherwise seem
// to continue the line of the one answered.
func (s *streamState) sinceAnswer() []byte {
	if s.answeredAt >= 0 {
		if after := s.n - s.answeredAt; after < int64(len(s.tail)) {
			return s.tail[int64(len(s.tail))-after:]
		}
	}
	return s.tail
}

func (w *watcher) answered(f promptFound) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.streams[f.stream].answeredAt = f.at
}

// stdout returns the captured output and the count of bytes written to
// stdout.
func (w *watcher) stdout() (*Output, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out, w.streams[outStream].n
}

// sink is the writer the child's stream goes through: observed first, then
// passed on. A failed write to dst is returned, so that a closed stdout ends
// the copy and the child sees a broken pipe, as it would without guard.
type sink struct {
	w   *watcher
	st  stream
	dst io.Writer
}

func (k sink) Write(p []byte) (int, error) {
	k.w.observe(k.st, p)
	if k.dst == nil {
		return len(p), nil
	}
	return k.dst.Write(p)
}
