package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/registry"
)

// memBoard is a board in memory; fail, when set, is every answer.
type memBoard struct {
	mu     sync.Mutex
	recs   map[string]Record
	fail   error
	writes atomic.Int32
}

func (b *memBoard) Read(_ context.Context, tag string) (Record, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return Record{}, false, b.fail
	}
	r, ok := b.recs[tag]
	return r, ok, nil
}

func (b *memBoard) Write(_ context.Context, tag string, r Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	if b.recs == nil {
		b.recs = map[string]Record{}
	}
	b.recs[tag] = r
	b.writes.Add(1)
	return nil
}

// clock is a test's clock, moved by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newLease(b Board, c *clock) *Lease {
	return &Lease{Board: b, Tag: "lease-x", Period: 30 * time.Second, Settle: time.Millisecond, now: c.now}
}

// A free lease is taken; a second sandbox finds it live and is told who
// holds it and how far the work is; once it goes unrenewed for a period
// by the waiter's own clock it is taken over, and the first holder's
// renewal then says the lease is lost.
func TestTakeWaitTakeOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &memBoard{}
	c := &clock{t: time.Unix(1_000_000, 0)}
	a := newLease(b, c)
	held, _, st, err := a.Take(ctx, Record{Host: "a", What: "the build of x"})
	if err != nil || held == nil || st != None {
		t.Fatalf("take a free lease: held %v, state %v, err %v", held, st, err)
	}
	if err := held.Renew(ctx, Progress{Percent: 45, Left: 3 * time.Minute, Phase: "step 2/2"}); err != nil {
		t.Fatal(err)
	}

	w := newLease(b, c)
	h2, other, st, err := w.Take(ctx, Record{Host: "b"})
	if err != nil || h2 != nil || st != Live {
		t.Fatalf("a live lease: held %v, state %v, err %v", h2, st, err)
	}
	if other.Host != "a" || other.Where() != "45%, about 3m0s left" || other.Seq != 2 {
		t.Fatalf("the holder's record: %+v (%s)", other, other.Where())
	}

	c.add(29 * time.Second)
	if _, st, _ := w.Look(ctx); st != Live {
		t.Fatalf("29 s unchanged of a 30 s period: %v, want live", st)
	}
	// A renewal resets the waiter's count: it saw the record change.
	if err := held.Renew(ctx, Progress{Percent: 50, Left: -1}); err != nil {
		t.Fatal(err)
	}
	c.add(29 * time.Second)
	if _, st, _ := w.Look(ctx); st != Live {
		t.Fatalf("renewed 0 s ago by the waiter's clock: %v, want live", st)
	}
	c.add(30 * time.Second)
	h2, _, st, err = w.Take(ctx, Record{Host: "b"})
	if err != nil || h2 == nil || st != Expired || h2.TookOver == nil || h2.TookOver.Host != "a" {
		t.Fatalf("an unrenewed lease is taken over: held %v, state %v, err %v", h2, st, err)
	}
	if err := held.Renew(ctx, Progress{Percent: 60, Left: -1}); !errors.Is(err, ErrLost) {
		t.Fatalf("the old holder's renewal: %v, want ErrLost", err)
	}
	if err := held.Release(ctx, Published); !errors.Is(err, ErrLost) {
		t.Fatalf("the old holder's release: %v, want ErrLost", err)
	}
	if r, st, _ := w.Look(ctx); st == Done || r.Host != "b" {
		t.Fatalf("the old holder's release changed the new one's lease: %+v %v", r, st)
	}
}

// A record the holder's own clock says was renewed long ago (a sandbox
// that died an hour ago) expires at once; a let-go lease says how.
func TestOldAndEndedLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := &memBoard{}
	c := &clock{t: time.Unix(1_000_000, 0)}
	b.recs = map[string]Record{"lease-x": {ID: "old", Host: "gone", Seq: 9, PeriodMS: 30_000, Renewed: c.now().Add(-time.Hour)}}
	l := newLease(b, c)
	if _, st, _ := l.Look(ctx); st != Expired {
		t.Fatalf("renewed an hour ago: %v, want expired", st)
	}
	held, _, _, err := l.Take(ctx, Record{Host: "new"})
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	if err := held.Release(ctx, Published); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := newLease(b, c).Look(ctx); st != Done {
		t.Fatalf("released as published: %v, want done", st)
	}
	// Let go as published, and its result not found by the taker: the
	// work is to do again.
	if h, _, st, _ := newLease(b, c).Take(ctx, Record{}); h == nil || st != Done {
		t.Fatalf("a done lease whose result is gone was not taken: %v %v", h, st)
	}
	b.recs["lease-x"] = Record{ID: "f", Ended: Failed, Renewed: c.now()}
	if h, _, st, _ := newLease(b, c).Take(ctx, Record{}); h != nil || st != Abandoned {
		t.Fatalf("a failed lease: %v %v, want abandoned and not taken", h, st)
	}
	// A failure two periods old is no reason to build uncoordinated.
	c.add(61 * time.Second)
	if h, _, _, _ := newLease(b, c).Take(ctx, Record{}); h == nil {
		t.Fatal("an old failed lease was not taken")
	}
	// A period of a year in a record is bounded.
	b.recs["lease-x"] = Record{ID: "y", Seq: 1, PeriodMS: int64(365 * 24 * time.Hour / time.Millisecond), Renewed: c.now()}
	y := newLease(b, c)
	y.Look(ctx)
	c.add(MaxPeriod)
	if _, st, _ := y.Look(ctx); st != Expired {
		t.Fatalf("a year's period is held to %s: %v", MaxPeriod, st)
	}
}

// A board that fails says so: never a free lease.
func TestBoardErrors(t *testing.T) {
	t.Parallel()
	b := &memBoard{fail: errors.New("connection refused")}
	h, _, _, err := newLease(b, &clock{t: time.Now()}).Take(context.Background(), Record{})
	if h != nil || err == nil {
		t.Fatalf("a failing board: held %v, err %v", h, err)
	}
}

// frozenBoard answers from memBoard until freeze; then a read blocks
// until its context ends, as a registry that stopped answering does, and
// ended says why the last one ended.
type frozenBoard struct {
	memBoard
	frozen  atomic.Bool
	entered chan struct{} // one send for each read that blocks
	mu      sync.Mutex
	ended   error
}

func (b *frozenBoard) Read(ctx context.Context, tag string) (Record, bool, error) {
	if !b.frozen.Load() {
		return b.memBoard.Read(ctx, tag)
	}
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	b.mu.Lock()
	b.ended = ctx.Err()
	b.mu.Unlock()
	return Record{}, false, ctx.Err()
}

// A holder whose registry stops answering mid-renewal is let go at once:
// Stop ends the renewal under way instead of waiting out its time, and
// the record stays readable meanwhile, so a call never waits on a frozen
// registry to finish.
func TestStopEndsARenewalUnderWay(t *testing.T) {
	t.Parallel()
	b := &frozenBoard{entered: make(chan struct{}, 1)}
	l := &Lease{Board: b, Tag: "lease-x", Period: 3 * time.Second, Settle: time.Millisecond}
	held, _, _, err := l.Take(context.Background(), Record{Host: "here"})
	if err != nil || held == nil {
		t.Fatalf("take: %v %v", held, err)
	}
	held.Keep(func() Progress { return Progress{Percent: -1, Left: -1} }, nil)
	b.frozen.Store(true)
	guardtest.Within(t, "a renewal reaching the frozen registry", func() { <-b.entered })
	guardtest.Within(t, "the record during a frozen renewal", func() { _ = held.Record() })
	guardtest.Within(t, "Stop during a frozen renewal", held.Stop)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !errors.Is(b.ended, context.Canceled) {
		t.Fatalf("the renewal under way ended by %v, want it cancelled by Stop", b.ended)
	}
}

// Many take at once: exactly one holds it (the board's last write), every
// other is told that one's record.
func TestManyTakeAtOnce(t *testing.T) {
	t.Parallel()
	b := &memBoard{}
	holders := take(t, func() *Lease {
		return &Lease{Board: b, Tag: "lease-x", Settle: 50 * time.Millisecond}
	}, 8)
	if holders != 1 {
		t.Fatalf("%d holders of one lease, want 1", holders)
	}
}

// take has n leases from mk take at once and returns how many hold one;
// each that does not is told the holder's record.
func take(t *testing.T, mk func() *Lease, n int) int {
	t.Helper()
	var wg sync.WaitGroup
	var holders atomic.Int32
	ids := make([]string, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			h, other, _, err := mk().Take(context.Background(), Record{Host: "sandbox"})
			if err != nil {
				t.Error(err)
				return
			}
			if h != nil {
				holders.Add(1)
				ids[i] = h.Record().ID
			} else {
				ids[i] = other.ID
			}
		})
	}
	close(start)
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == "" {
			t.Errorf("the sandboxes disagree on the holder: %q", ids)
			break
		}
	}
	return int(holders.Load())
}

// On a real registry (CNCF distribution): 8 take at once, one holds;
// Keep renews it with the work's progress; another process adopts it by
// its id and releases it; a tag that is not a lease is an error.
func TestOnARealRegistry(t *testing.T) {
	reg := guardtest.SignedInRegistry(t)
	ref, err := registry.Parse(registry.Scheme + reg.Host + "/fleet/stash")
	if err != nil {
		t.Fatal(err)
	}
	open := func() Board {
		repo, err := (&registry.Client{PlainHTTP: []string{reg.Host}}).Open(ref)
		if err != nil {
			t.Fatal(err)
		}
		return OnRegistry(repo)
	}
	mk := func() *Lease { return &Lease{Board: open(), Tag: "lease-abc", Period: 3 * time.Second} }
	if n := take(t, mk, 8); n != 1 {
		t.Fatalf("%d holders of one lease in the registry, want 1", n)
	}

	ctx := context.Background()
	l := mk()
	r, st, err := l.Look(ctx)
	if err != nil || st != Live {
		t.Fatalf("look: %v %v", st, err)
	}
	held, err := mk().Adopt(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	held.Keep(func() Progress { return Progress{Percent: 70, Left: time.Minute, Phase: "pushing"} }, nil)
	var got Record
	guardtest.Within(t, "a renewal by Keep", func() {
		for got.Phase != "pushing" {
			time.Sleep(50 * time.Millisecond)
			got, _, _ = l.Look(ctx)
		}
	})
	held.Stop()
	if got.Percent != 70 || got.Seq < 2 {
		t.Fatalf("after a renewal: %+v", got)
	}
	if _, err := mk().Adopt(ctx, "not-the-holder"); !errors.Is(err, ErrLost) {
		t.Fatalf("adopt by another id: %v", err)
	}
	if err := held.Release(ctx, Published); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := mk().Look(ctx); st != Done {
		t.Fatalf("after the release: %v", st)
	}

	// A tag holding something else is an error, not a free lease.
	repo, _ := (&registry.Client{PlainHTTP: []string{reg.Host}}).Open(ref)
	if _, err := repo.Push(ctx, "lease-other", "application/vnd.other", emptyJSON, []registry.Blob{emptyJSON}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (&Lease{Board: open(), Tag: "lease-other"}).Look(ctx); err == nil {
		t.Fatal("another artifact under the tag was read as no lease")
	}
}

func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"id":"a","host":"h","seq":1,"percent":-1,"left_ms":-1}`))
	f.Add([]byte(`{"id":""}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"id":"a","host":"\u001b[2Jevil","left_ms":9223372036854775807}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseRecord(data)
		if err == nil && r.ID == "" {
			t.Fatal("a record without a holder was accepted")
		}
		for _, s := range []string{r.Host, r.Phase, r.What} {
			for _, c := range []byte(s) {
				if err == nil && (c < 0x20 || c > 0x7e) {
					t.Fatalf("an unprintable byte %#x reaches the terminal in %q", c, s)
				}
			}
		}
		if err == nil && r.Left() < -1 {
			t.Fatalf("a time left of %s", r.Left())
		}
		if err == nil {
			_ = r.Where()
			_ = r.period(time.Second)
		}
	})
}
