package progress

import (
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Snapshot is where a task stands: what a detached heal writes to its job
// record and what the call that follows it shows (Reporter.Show).
type Snapshot struct {
	Percent float64       // 0 to 100; -1 when unknown
	Left    time.Duration // the time left; -1 when unknown
	Status  string        // the phase or the last line
	// Estimated says Left comes from the task's own rate so far (a first
	// build, with no earlier one to go by, or one that ran past what it
	// was expected to take), not from a measured length.
	Estimated bool
	// Over is the length the task was expected to take (Expect) once it
	// has run past it; 0 otherwise.
	Over time.Duration
}

// A first build's time left is estimated from its own rate once it has run
// estimateAfter and is past estimateFrom percent: earlier, a configure
// step or the first few objects say too little (docs/healing-in-the-background.md).
const (
	estimateAfter = 20 * time.Second
	estimateFrom  = 2.0
)

// Snapshot is where the task stands now. A download's time left comes
// from its bytes and its measured rate, a build's from its own percent and
// the length it is expected to take (Expect).
func (r *Reporter) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shown != nil {
		return *r.shown
	}
	s := Snapshot{Percent: -1, Left: -1, Status: r.status}
	elapsed := r.now().Sub(r.start)
	if r.total > 0 {
		s.Percent = float64(r.done) * 100 / float64(r.total)
		if r.waiting != "" {
			s.Status = r.waiting
			return s
		}
		if rate := r.recentRate(elapsed); rate > 0 && r.done <= r.total {
			s.Left = time.Duration(float64(r.total-r.done) / rate * float64(time.Second))
		}
		return s
	}
	s.Percent = r.percent
	switch {
	case r.expect > 0 && elapsed > r.expect:
		// Past what it was expected to take (the last build was an
		// incremental one, the machine is busier): say so, and go by
		// its own rate once its percent says something.
		s.Over = r.expect
		if r.percent >= estimateFrom && r.percent < 100 {
			s.Left = time.Duration(float64(elapsed) * (100 - r.percent) / r.percent)
			s.Estimated = true
		}
	case r.expect <= 0 && r.percent >= estimateFrom && r.percent < 100 && elapsed >= estimateAfter:
		s.Left = time.Duration(float64(elapsed) * (100 - r.percent) / r.percent)
		s.Estimated = true
	case r.expect <= 0:
	case r.percent >= 0:
		s.Left = time.Duration(float64(r.expect) * (100 - r.percent) / 100)
	case elapsed < r.expect:
		s.Left = r.expect - elapsed
	}
	return s
}

// rateWindow is how far back a snapshot's download rate looks: a burst at
// the start (a resumed range, a fast first second) must not promise a time
// left that the rate since then cannot keep.
const rateWindow = 5 * time.Second

// mark is where a download stood at one snapshot.
type mark struct {
	at   time.Time
	done int64
}

// recentRate is the bytes per second over the last rateWindow of
// snapshots, or over the whole attempt until a second of them is there.
// r.mu is held.
func (r *Reporter) recentRate(elapsed time.Duration) float64 {
	now := r.now()
	r.marks = append(r.marks, mark{now, r.done})
	for len(r.marks) > 2 && now.Sub(r.marks[1].at) >= rateWindow {
		r.marks = r.marks[1:]
	}
	if first := r.marks[0]; now.Sub(first.at) >= time.Second && first.done >= r.base {
		return float64(r.done-first.done) / now.Sub(first.at).Seconds()
	}
	return float64(r.done-r.base) / elapsed.Seconds()
}

// buildPercentRe is buildPercent's expression, once compiled.
var (
	buildPercentOnce sync.Once
	buildPercentRe   *regexp.Regexp
)

// buildPercent matches a build tool's own progress: CMake's generated
// makefiles print "[ 46%]", ninja "[123/218]". It is compiled on the first
// build line, not when the process starts: every shim call links this
// package, and a healthy one reads no build output.
func buildPercent() *regexp.Regexp {
	buildPercentOnce.Do(func() { buildPercentRe = regexp.MustCompile(`\[\s*(\d{1,3})%\]|\[(\d+)/(\d+)\]`) })
	return buildPercentRe
}

// ParsePercent reads a build tool's percent from one of its lines; the
// last such mark in the line wins.
func ParsePercent(line string) (float64, bool) {
	ms := buildPercent().FindAllStringSubmatch(line, -1)
	if len(ms) == 0 {
		return 0, false
	}
	m := ms[len(ms)-1]
	if m[1] != "" {
		n, _ := strconv.Atoi(m[1])
		if n > 100 {
			return 0, false
		}
		return float64(n), true
	}
	done, err1 := strconv.Atoi(m[2])
	total, err2 := strconv.Atoi(m[3])
	if err1 != nil || err2 != nil || total <= 0 || done > total {
		return 0, false
	}
	return float64(done) * 100 / float64(total), true
}
