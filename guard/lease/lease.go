// Package lease lets the sandboxes of a fleet agree, through the registry
// they share, which one does a long piece of work (a cold build, a model's
// download) while the others wait for its result (docs/fleet-lease.md).
//
// A lease is a small record on a board: in a registry, an artifact tagged
// from the work's key whose annotation holds the record (OnRegistry). Its
// holder renews it while it works (every third of its period) with how far
// it is; whoever finds it renewed waits; whoever finds it not renewed for
// a whole period takes it over. A registry has no compare-and-set, so a
// lease is taken by writing it, waiting a moment (Settle) and reading it
// back: of two that write at once, the one whose record is read back
// holds it and the other waits. Two can still both believe they hold it
// when one is slow enough between its read and its write; the work must
// be harmless to do twice (the same key gives the same signed result).
//
// Expiry is judged by the waiter's own clock (a record unchanged for a
// period since it first saw it), so clocks that differ between machines
// do not matter, except for a record renewed long ago by the holder's
// clock, which expires at once.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Ended says how a lease's holder let go of it.
type Ended string

// The ends of a lease: its work's result was published (a waiter takes
// it from there), or the work failed (each waiter works on its own).
const (
	Published Ended = "published"
	Failed    Ended = "failed"
)

// Record is what a lease says: who holds it, since when, how far its work
// is, and once let go, how it ended.
type Record struct {
	ID      string    `json:"id"` // random, the holder's: who holds it
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	What    string    `json:"what"` // "build of llama-cpp", "download of q.gguf"
	Started time.Time `json:"started"`
	Renewed time.Time `json:"renewed"` // by the holder's clock
	// PeriodMS is the holder's period: a waiter takes the lease over
	// when it has not changed for that long.
	PeriodMS int64 `json:"period_ms"`
	Seq      int64 `json:"seq"` // one more each renewal
	// Percent and LeftMS are the work's own progress: -1 while unknown.
	Percent float64 `json:"percent"`
	LeftMS  int64   `json:"left_ms"`
	Phase   string  `json:"phase,omitempty"`
	Ended   Ended   `json:"ended,omitempty"`
}

// Left is the time the holder last said its work needs; -1 when unknown.
func (r Record) Left() time.Duration {
	if r.LeftMS < 0 {
		return -1
	}
	// A remote party's number: a week is more than any build says.
	return time.Duration(min(r.LeftMS, int64(7*24*time.Hour/time.Millisecond))) * time.Millisecond
}

// period is the record's own period, bounded: a record is a remote
// party's word, and a period of a year would hold a fleet that long.
func (r Record) period(fallback time.Duration) time.Duration {
	p := time.Duration(r.PeriodMS) * time.Millisecond
	if p <= 0 {
		p = fallback
	}
	return min(max(p, MinPeriod), MaxPeriod)
}

// The bounds of a lease's period.
const (
	MinPeriod     = time.Second
	MaxPeriod     = 10 * time.Minute
	DefaultPeriod = 30 * time.Second
)

// Board is where leases are written and read back.
type Board interface {
	// Read returns the record under tag; found is false when there is
	// none.
	Read(ctx context.Context, tag string) (r Record, found bool, err error)
	Write(ctx context.Context, tag string, r Record) error
}

// State is what a look at a lease found.
type State int

// The states of a lease, as a waiter sees them.
const (
	None      State = iota // no record: nobody works on it
	Live                   // held and renewed: wait
	Expired                // not renewed for its period: take it over
	Done                   // let go with a published result: take it
	Abandoned              // let go after a failure: work on your own
)

func (s State) String() string {
	return [...]string{"none", "live", "expired", "done", "abandoned"}[s]
}

// ErrLost is a renewal or release of a lease that another holds now.
var ErrLost = errors.New("the lease is held by another now")

// Lease is one lease on a board, as this process sees it. Not safe for
// use by more than one goroutine but through its Held.
type Lease struct {
	Board  Board
	Tag    string
	Period time.Duration // this process's; 0 = DefaultPeriod
	// Settle is the wait between writing a record and reading it back;
	// 0 = DefaultSettle.
	Settle time.Duration

	now func() time.Time // nil = time.Now; a test moves the clock

	// What was last seen, and since when by this process's clock.
	seenID  string
	seenSeq int64
	seenAt  time.Time
}

// DefaultSettle is long beside a registry's answer (milliseconds) and
// short beside the work a lease saves (minutes).
const DefaultSettle = time.Second

func (l *Lease) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

func (l *Lease) period() time.Duration {
	if l.Period <= 0 {
		return DefaultPeriod
	}
	return min(max(l.Period, MinPeriod), MaxPeriod)
}

// Poll is how often a waiter looks again: a third of the period, at most
// 2 s, so that a waiter answers within seconds of the result.
func (l *Lease) Poll() time.Duration { return min(l.period()/3, 2*time.Second) }

// Look reads the lease and says what it is.
func (l *Lease) Look(ctx context.Context) (Record, State, error) {
	r, found, err := l.Board.Read(ctx, l.Tag)
	if err != nil || !found {
		return r, None, err
	}
	return r, l.judge(r), nil
}

// judge is the state of record r, seen now.
func (l *Lease) judge(r Record) State {
	now := l.clock()
	switch r.Ended {
	case Published:
		return Done
	case "":
	default:
		// A failure is every waiter's to build on its own while it is
		// fresh; an old one (a passing trouble, days ago) is no reason
		// to leave the fleet uncoordinated for good.
		if now.Sub(r.Renewed) > 2*r.period(l.period()) {
			return None
		}
		return Abandoned
	}
	if r.ID != l.seenID || r.Seq != l.seenSeq || l.seenAt.IsZero() {
		l.seenID, l.seenSeq, l.seenAt = r.ID, r.Seq, now
	}
	p := r.period(l.period())
	if now.Sub(l.seenAt) >= p || now.Sub(r.Renewed) > 2*p {
		return Expired
	}
	return Live
}

// Take takes the lease for me when nobody holds it, its holder stopped
// renewing it, or it was let go as published (the caller looks for the
// result first: one it did not find is gone, and the work is to do
// again). It returns the lease held, or the record of the one who holds
// it (then held is nil), or the board's error. me's ID, Seq, Started,
// Renewed, PeriodMS and Ended are set here. A lease let go after a
// failure (Abandoned) is not taken: the caller works on its own, as do
// the others, rather than fail one after the other.
func (l *Lease) Take(ctx context.Context, me Record) (held *Held, other Record, st State, err error) {
	cur, st, err := l.Look(ctx)
	if err != nil || st == Live || st == Abandoned {
		return nil, cur, st, err
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	now := l.clock()
	me.ID, me.Seq, me.Started, me.Renewed, me.Ended = hex.EncodeToString(id[:]), 1, now, now, ""
	me.PeriodMS = l.period().Milliseconds()
	if err := l.Board.Write(ctx, l.Tag, me); err != nil {
		return nil, Record{}, st, err
	}
	settle := l.Settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	if err := sleep(ctx, settle); err != nil {
		return nil, Record{}, st, err
	}
	got, found, err := l.Board.Read(ctx, l.Tag)
	if err != nil {
		return nil, Record{}, st, err
	}
	if !found || got.ID != me.ID {
		// Another wrote after us: theirs it is.
		return nil, got, l.judge(got), nil
	}
	h := &Held{l: l, rec: got}
	if st == Expired {
		h.TookOver = &cur
	}
	return h, Record{}, st, nil
}

// Adopt takes up, in another process, a lease held under id (the one that
// publishes the result of the work the holder did): ErrLost when the
// board holds another's record or one let go.
func (l *Lease) Adopt(ctx context.Context, id string) (*Held, error) {
	r, found, err := l.Board.Read(ctx, l.Tag)
	if err != nil {
		return nil, err
	}
	if !found || r.ID != id || r.Ended != "" {
		return nil, ErrLost
	}
	return &Held{l: l, rec: r}, nil
}

// Held is a lease this process holds.
type Held struct {
	l *Lease
	// TookOver is the record of the holder it was taken over from, when
	// it was.
	TookOver *Record

	writing sync.Mutex // one write at a time, held across its round trip
	mu      sync.Mutex // rec, never held across a round trip
	rec     Record

	// keepMu, not mu: Stop must not wait for a write. (Stop still waits
	// for a Renew of another caller that holds writing; every caller
	// bounds its context.)
	keepMu sync.Mutex
	stop   context.CancelFunc // ends Keep's renewals, the one under way too
	done   chan struct{}
}

// Record is the lease as last written.
func (h *Held) Record() Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rec
}

// Progress is how far the work is, for a renewal.
type Progress struct {
	Percent float64       // -1 when unknown
	Left    time.Duration // -1 when unknown
	Phase   string
}

// Renew writes the lease again with p, after checking it is still ours:
// ErrLost when another holds it now (taken over while this process was
// stopped, say); the work goes on, but the lease is not written again.
func (h *Held) Renew(ctx context.Context, p Progress) error {
	return h.write(ctx, func(r *Record) {
		r.Percent, r.LeftMS, r.Phase = p.Percent, -1, p.Phase
		if p.Left >= 0 {
			r.LeftMS = p.Left.Milliseconds()
		}
	})
}

// Release lets the lease go, saying how the work ended.
func (h *Held) Release(ctx context.Context, how Ended) error {
	h.Stop()
	return h.write(ctx, func(r *Record) { r.Ended = how })
}

func (h *Held) write(ctx context.Context, change func(*Record)) error {
	h.writing.Lock()
	defer h.writing.Unlock()
	mine := h.Record()
	cur, found, err := h.l.Board.Read(ctx, h.l.Tag)
	if err != nil {
		return err
	}
	if !found || cur.ID != mine.ID || cur.Ended != "" {
		return ErrLost
	}
	next := mine
	change(&next)
	next.Seq = max(cur.Seq, mine.Seq) + 1
	next.Renewed = h.l.clock()
	if err := h.l.Board.Write(ctx, h.l.Tag, next); err != nil {
		return err
	}
	h.mu.Lock()
	h.rec = next
	h.mu.Unlock()
	return nil
}

// Keep renews the lease every third of its period, with what progress
// says, until Stop or Release, or until it is lost. A renewal that fails
// (the registry is down) is tried again at the next; the work goes on
// either way. lost, when set, is told once why the renewals stopped.
func (h *Held) Keep(progress func() Progress, lost func(error)) {
	h.keepMu.Lock()
	if h.stop != nil {
		h.keepMu.Unlock()
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	h.stop, h.done = stop, make(chan struct{})
	done := h.done
	h.keepMu.Unlock()
	every := h.l.period() / 3
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// A renewal may take up to the period: a slow one (a loaded
			// registry) still lands and keeps the lease, where one given
			// up at the next tick would not.
			rctx, cancel := context.WithTimeout(ctx, h.l.period())
			err := h.Renew(rctx, progress())
			cancel()
			if errors.Is(err, ErrLost) {
				if lost != nil {
					lost(err)
				}
				return
			}
		}
	}()
}

// Stop ends Keep's renewals, the one under way too (a registry that does
// not answer never holds up the caller), and waits for Keep to return.
func (h *Held) Stop() {
	h.keepMu.Lock()
	stop, done := h.stop, h.done
	h.stop = nil
	h.keepMu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Where says how far the holder's work is, for one line: "45%, about
// 3m0s left", "time left unknown".
func (r Record) Where() string {
	s := ""
	if r.Percent >= 0 {
		s = fmt.Sprintf("%.0f%%, ", r.Percent)
	}
	if left := r.Left(); left >= 0 {
		return s + "about " + left.Round(time.Second).String() + " left"
	}
	return s + "time left unknown"
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// parseRecord reads a record a board holds; a record that is not one is
// an error, never a lease nobody holds.
func parseRecord(data []byte) (Record, error) {
	var r Record
	if len(data) > maxRecord {
		return r, fmt.Errorf("a lease record of %d bytes, over %d", len(data), maxRecord)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("not a lease record: %w", err)
	}
	if r.ID == "" {
		return r, errors.New("a lease record without a holder")
	}
	// Shown on the terminal of every waiter: an unsigned remote party's
	// words, made printable and short.
	r.Host, r.Phase, r.What = printable(r.Host, 64), printable(r.Phase, 120), printable(r.What, 120)
	return r, nil
}

// printable is s with every byte outside printable ASCII replaced by '?',
// cut at n bytes.
func printable(s string, n int) string {
	b := []byte(s[:min(len(s), n)])
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// maxRecord bounds a record: a host name, a phase and a few numbers.
const maxRecord = 8 << 10
