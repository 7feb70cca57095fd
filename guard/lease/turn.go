package lease

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"
)

// Fleet is how a healer reaches the fleet's leases.
type Fleet struct {
	Period time.Duration // [stash] lease
	Host   string        // this sandbox's name in a lease; "" = os.Hostname
	// Board opens the board of leases in the registry dest.
	Board func(dest string) (Board, error)
	// CanPublish says whether this sandbox can publish the result it
	// would make (it holds the key that signs a stash entry; a model
	// needs none): only then does it hold a lease.
	CanPublish func() bool
}

// Me is this sandbox's record for a lease on what ("build of X").
func (f *Fleet) Me(what string) Record {
	host := f.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	return Record{Host: host, PID: os.Getpid(), What: what, Percent: -1, LeftMS: -1}
}

// ForTheFleet ends the phase of a wait for another sandbox's work ("built
// by HOST for the fleet", "downloaded by HOST for the fleet") and starts
// that of work this sandbox does for the fleet, holding the lease, in a
// heal's record: guard status and a call's exit-75 line say which.
const ForTheFleet = "for the fleet"

// WaitingPhase reports whether phase is that of a wait for another
// sandbox's work for the fleet: "built by HOST for the fleet".
func WaitingPhase(phase string) bool {
	return strings.HasSuffix(phase, " "+ForTheFleet) && (strings.HasPrefix(phase, "built by ") || strings.HasPrefix(phase, "downloaded by "))
}

// Turn is one sandbox's turn at work the fleet shares (a build, a model's
// download): it takes the lease and does the work, or waits for the one
// who holds it and takes the result, or, when the board cannot hold a
// lease or the holder failed, does the work on its own.
type Turn struct {
	Lease *Lease
	Me    Record // this sandbox's record, for Take
	// CanHold says whether this sandbox may hold the lease (it can
	// publish the result); one that cannot waits on another's lease but
	// works on its own when none is held.
	CanHold bool
	// Found looks for the result: true once it is there and taken; an
	// error when the look failed (a registry that does not answer, a
	// result that cannot be used).
	Found func(ctx context.Context) (bool, error)
	// Waiting is told the holder's record at each look while another
	// holds the lease: the first time, the wait begins.
	Waiting func(Record)
}

// AbandonedError is a lease its holder let go after its work failed: each
// waiter works on its own.
type AbandonedError struct{ Holder Record }

func (e *AbandonedError) Error() string {
	return e.Holder.Host + "'s " + e.Holder.What + " failed"
}

// misses is how many polls long the looks may fail in a row while
// waiting before the waiter works on its own: one failed answer is not a
// registry gone.
const misses = 3

// Take runs the turn: got when the result another published was taken
// (no work to do); else held is the lease this sandbox now holds, or nil
// when it works on its own, and then why says why (nil: free, and this
// sandbox cannot hold it; an *AbandonedError; the board's or the look's
// error). It waits as long as another renews the lease, within ctx; a ctx
// that ends is why.
func (t Turn) Take(ctx context.Context) (held *Held, got bool, why error) {
	waiting := false
	var failed time.Time
	for first := true; ; first = false {
		var err error
		if !first {
			if got, err = t.Found(ctx); got {
				return nil, true, nil
			}
		}
		var other Record
		var st State
		if err == nil {
			if t.CanHold {
				held, other, st, err = t.Lease.Take(ctx, t.Me)
			} else {
				other, st, err = t.Lease.Look(ctx)
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil, false, context.Cause(ctx)
		case err != nil && !waiting:
			return nil, false, err
		case err != nil:
			if failed.IsZero() {
				failed = time.Now()
			}
			if time.Since(failed) > misses*t.Lease.Poll() {
				return nil, false, err
			}
		case held != nil:
			return held, false, nil
		case st == Abandoned:
			return nil, false, &AbandonedError{Holder: other}
		case st != Live:
			return nil, false, nil // free, and this sandbox cannot hold it
		default:
			failed, waiting = time.Time{}, true
			t.Waiting(other)
		}
		if err := sleep(ctx, t.Lease.Poll()); err != nil {
			return nil, false, err
		}
	}
}

// IsAbandoned reports whether why is a holder's failure, and whose.
func IsAbandoned(why error) (Record, bool) {
	var ae *AbandonedError
	if errors.As(why, &ae) {
		return ae.Holder, true
	}
	return Record{}, false
}
