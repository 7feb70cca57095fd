package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A turn while another holds the lease: it waits (told the holder's
// record) until the result is found; when the holder lets go as failed,
// it works on its own, told why; a board that stops answering while it
// waits sends it to work on its own after a few looks; one that cannot
// hold a lease works on its own when none is held.
func TestTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newTurn := func(b *memBoard, found func() bool) (Turn, *atomic.Int32) {
		var waits atomic.Int32
		return Turn{
			Lease:   &Lease{Board: b, Tag: "lease-x", Period: time.Second, Settle: time.Millisecond},
			Me:      Record{Host: "me", What: "build of x"},
			CanHold: true,
			Found:   func(context.Context) (bool, error) { return found(), nil },
			Waiting: func(Record) { waits.Add(1) },
		}, &waits
	}
	live := func(b *memBoard) {
		b.Write(ctx, "lease-x", Record{ID: "other", Host: "h", What: "build of x", Seq: 1, Renewed: time.Now(), PeriodMS: 60_000})
	}

	b := &memBoard{}
	live(b)
	var looks atomic.Int32
	turn, waits := newTurn(b, func() bool { return looks.Add(1) == 3 })
	held, got, why := turn.Take(ctx)
	if !got || held != nil || why != nil || waits.Load() < 1 {
		t.Fatalf("waiting for a live holder's result: held %v, got %v, why %v, %d waits", held, got, why, waits.Load())
	}

	b = &memBoard{}
	live(b)
	turn, _ = newTurn(b, func() bool {
		b.Write(ctx, "lease-x", Record{ID: "other", Host: "h", What: "build of x", Ended: Failed, Renewed: time.Now()})
		return false
	})
	_, got, why = turn.Take(ctx)
	if r, ok := IsAbandoned(why); got || !ok || r.Host != "h" || why.Error() != "h's build of x failed" {
		t.Fatalf("a holder that failed: got %v, why %v", got, why)
	}

	b = &memBoard{}
	live(b)
	down := errors.New("connection refused")
	turn, _ = newTurn(b, func() bool { b.mu.Lock(); b.fail = down; b.mu.Unlock(); return false })
	turn.Found = func(context.Context) (bool, error) { b.mu.Lock(); b.fail = down; b.mu.Unlock(); return false, down }
	_, got, why = turn.Take(ctx)
	if got || !errors.Is(why, down) {
		t.Fatalf("a registry gone while waiting: got %v, why %v", got, why)
	}

	turn, _ = newTurn(&memBoard{}, func() bool { return false })
	turn.CanHold = false
	held, got, why = turn.Take(ctx)
	if held != nil || got || why != nil {
		t.Fatalf("a free lease, and this sandbox cannot hold it: held %v, got %v, why %v", held, got, why)
	}

	ended, cancel := context.WithCancel(ctx)
	cancel()
	b = &memBoard{}
	live(b)
	turn, _ = newTurn(b, func() bool { return false })
	if _, got, why = turn.Take(ended); got || why == nil {
		t.Fatalf("a turn whose context ended: got %v, why %v", got, why)
	}
}
