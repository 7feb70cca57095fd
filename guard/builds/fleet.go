package builds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// One build per fleet (docs/fleet-lease.md): a build of a recipe whose
// stash_to registry is also among its stash_from, for a key no source has
// an entry of, first takes the fleet's lease on that key in the registry.
// The sandbox that holds it builds, renewing it with its progress, and its
// stash_to push publishes the entry and lets the lease go; every other
// waits, saying who builds and how far, and restores the entry once it is
// pushed. A lease not renewed for its period is taken over. A registry
// that cannot hold a lease costs one line: each builds on its own.

// fleetTurn is a build's part in the fleet's lease: the lease this
// sandbox holds, once it does, and the reporter of its build, whose
// progress the renewals carry.
type fleetTurn struct {
	held *lease.Held
	key  string // the key the lease was taken on
	rep  atomic.Pointer[progress.Reporter]
	// pause, when set, stops the build's own progress line as a wait on
	// another's lease begins (the wait shows the holder's); waited says
	// one began.
	pause  func()
	waited bool
}

// leaseOf is the fleet's lease on rec's build for key; nil when the
// recipe's build does not go through one.
func (b *Builder) leaseOf(rec *manifest.Build, key stash.Key) (*lease.Lease, error) {
	// With no key trusted here, another's entry could never be
	// restored: waiting for it would only add its build to this one.
	if b.Fleet == nil || b.Stash == nil || len(b.Stash.Trusted) == 0 || key.Sum == "" || !registry.IsRef(rec.StashTo) || !slices.Contains(rec.StashFrom, rec.StashTo) {
		return nil, nil
	}
	board, err := b.Fleet.Board(rec.StashTo)
	if err != nil {
		return nil, err
	}
	return &lease.Lease{Board: board, Tag: stash.LeaseTag(rec.Name, key.Sum), Period: b.Fleet.Period}, nil
}

// takeTurn is the fleet's lease before j's build: it returns true when
// the entry another sandbox built for key was restored (no build), false
// when this sandbox builds, holding the lease (j.fleet.held) or on its
// own. It waits as long as another renews the lease, within ctx.
func (b *Builder) takeTurn(ctx context.Context, j job, key stash.Key) bool {
	l, err := b.leaseOf(j.rec, key)
	if l == nil && err == nil {
		return false
	}
	dest := stash.Redact(j.rec.StashTo)
	if err != nil {
		b.leaseUnavailable(j, dest, err)
		return false
	}
	w := &fleetWait{b: b, j: j, dest: dest}
	defer w.stop()
	held, got, why := lease.Turn{
		Lease:   l,
		Me:      b.Fleet.Me("build of " + j.name),
		CanHold: b.Fleet.CanPublish != nil && b.Fleet.CanPublish(),
		Found:   func(ctx context.Context) (bool, error) { return w.restore(ctx, key) },
		Waiting: w.show,
	}.Take(ctx)
	switch {
	case got:
		return true
	case held != nil:
		j.fleet.key = key.Sum
		b.hold(j, dest, held)
	case ctx.Err() != nil:
	case why != nil:
		w.stop()
		if holder, ok := lease.IsAbandoned(why); ok {
			fmt.Fprintf(b.stderr(), "guard: %s's build of %s for the fleet failed; building here\n", holder.Host, j.name)
		} else {
			b.leaseUnavailable(j, dest, why)
		}
	}
	return false
}

// hold starts the renewals of the lease this sandbox took, with the
// progress of its build, and says so.
func (b *Builder) hold(j job, dest string, held *lease.Held) {
	j.fleet.held = held
	ev := heallog.Event{Event: heallog.FleetLease, Tool: j.rec.Name, Target: dest, Result: "taken"}
	line := fmt.Sprintf("guard: building %s for the fleet (its lease in %s)", j.name, dest)
	if was := held.TookOver; was != nil {
		ev.Result, ev.Reason = "taken over", fmt.Sprintf("from %s (pid %d), not renewed for its period", was.Host, was.PID)
		line = fmt.Sprintf("guard: %s (pid %d) stopped renewing its lease on building %s; building it for the fleet here", was.Host, was.PID, j.name)
	}
	b.event(ev)
	fmt.Fprintln(b.stderr(), line)
	turn := j.fleet
	held.Keep(func() lease.Progress {
		p := lease.Progress{Percent: -1, Left: -1, Phase: "building"}
		if rep := turn.rep.Load(); rep != nil {
			s := rep.Snapshot()
			p.Percent, p.Left = s.Percent, s.Left
		}
		return p
	}, func(err error) {
		fmt.Fprintf(b.stderr(), "guard: the fleet's lease on building %s was taken over by another sandbox; building on\n", j.name)
	})
}

// letGo ends this sandbox's part in the lease after its build: the
// stash_to push that publishes the entry holds it from here (pushing
// says whether one started), or, when none did, it is let go as failed
// so that the waiters build on their own at once.
func (b *Builder) letGo(j job, pushing bool) {
	held := j.fleet.held
	if held == nil {
		return
	}
	held.Stop()
	if pushing {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := held.Release(ctx, lease.Failed)
	ev := heallog.Event{Event: heallog.FleetLease, Tool: j.rec.Name, Target: stash.Redact(j.rec.StashTo), Result: "released", Reason: string(lease.Failed)}
	if err != nil {
		ev.Level, ev.Reason = "warn", "failed; the release itself failed: "+units.OneLine(err)
	}
	b.event(ev)
}

// leaseUnavailable says that the registry cannot hold the lease: this
// sandbox builds on its own, as each did before leases.
func (b *Builder) leaseUnavailable(j job, dest string, err error) {
	b.event(heallog.Event{Level: "warn", Event: heallog.FleetLease, Tool: j.rec.Name, Target: dest, Result: "unavailable", Reason: units.OneLine(err)})
	fmt.Fprintf(b.stderr(), "guard: the fleet's registry %s cannot hold a lease on building %s (%s); building here\n", dest, j.name, units.OneLine(err))
}

// fleetWait is a wait for another sandbox's build.
type fleetWait struct {
	b      *Builder
	j      job
	dest   string
	rep    *progress.Reporter
	holder lease.Record
	start  time.Time
}

// show says, the first time, who builds and that this sandbox waits, then
// keeps the progress line (and a detached heal's record, which the calls
// waiting for it read) on the holder's progress.
func (w *fleetWait) show(r lease.Record) {
	w.holder = r
	status := fmt.Sprintf("built by %s %s", r.Host, lease.ForTheFleet)
	if w.rep == nil {
		w.start = time.Now()
		if !w.j.fleet.waited && w.j.fleet.pause != nil {
			w.j.fleet.pause()
		}
		w.j.fleet.waited = true
		w.b.event(heallog.Event{Event: heallog.FleetLease, Tool: w.j.rec.Name, Target: w.dest, Result: "waited", Reason: fmt.Sprintf("%s (pid %d) holds it", r.Host, r.PID)})
		fmt.Fprintf(w.b.stderr(), "guard: %s is being built by %s (pid %d) for the fleet (%s); waiting for its entry in %s\n", w.j.name, r.Host, r.PID, r.Where(), w.dest)
		w.rep = progress.Start(w.b.stderr(), "waiting for "+w.j.name, 0, w.b.Pace)
	}
	w.rep.Show(progress.Snapshot{Percent: r.Percent, Left: r.Left(), Status: status})
}

func (w *fleetWait) stop() {
	if w.rep != nil {
		w.rep.Stop("")
		w.rep = nil
	}
}

// restore takes the entry from the registry once it is there: done when
// it was restored and the target is healthy; an error when the registry
// did not answer or an entry came and cannot be used.
func (w *fleetWait) restore(ctx context.Context, key stash.Key) (bool, error) {
	b, j := w.b, w.j
	got, err := b.Stash.Restore(ctx, j.rec.Name, key, j.rec.Dir, j.rec.Outputs, []string{j.rec.StashTo})
	if errors.Is(err, stash.ErrNoEntry) {
		return false, nil
	}
	if err == nil && j.target != "" {
		if h := CheckBinary(j.target, b.StampDir(), b.libraryPath()); !h.OK {
			err = fmt.Errorf("%s is still %s after the restore", j.target, h.Reason)
		}
	}
	if err != nil {
		return false, err // said by the caller once it stops waiting
	}
	ev := heallog.Event{Event: heallog.BinaryRestore, Tool: j.tool, Target: j.target, Result: "ok", Bytes: got.Bytes,
		Reason: fmt.Sprintf("from %s, built by %s for the fleet", w.dest, w.holder.Host)}
	if !w.start.IsZero() {
		ev.DurationMS = time.Since(w.start).Milliseconds()
	}
	b.event(ev)
	w.stop()
	fmt.Fprintf(b.stderr(), "guard: restored %s from %s, built by %s for the fleet (%s, a %s entry); no build needed\n",
		j.name, w.dest, w.holder.Host, units.Count(got.Files, "file", "files"), units.Bytes(got.Bytes))
	return true, nil
}
