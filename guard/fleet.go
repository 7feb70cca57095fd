package guard

import (
	"context"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/guard/units"
)

// PublishUnderLease is the stash_to push's part in the fleet's lease
// (docs/fleet-lease.md): the build that held the lease of id on recipe's
// entry for key hands it to the push, which renews it while it pushes and
// lets it go once the entry is in dest (published: the waiters restore
// it) or the push failed (each waiter builds on its own). The returned
// function lets it go, told whether the push succeeded; a lease lost or
// unreachable is said in the heal log and costs the push nothing.
func (e *Engine) PublishUnderLease(recipe, key, dest, id string) func(pushed bool) {
	return e.publishUnderLease(recipe, stash.LeaseTag(recipe, key), dest, id, "pushing the entry")
}

// PublishModelUnderLease is PublishUnderLease for the push of a model
// file to its push_to, dest (guard model push --lease).
func (e *Engine) PublishModelUnderLease(file, dest, id string) func(pushed bool) {
	return e.publishUnderLease(file, models.LeaseTag(dest), dest, id, "pushing the model")
}

// publishUnderLease holds the lease tagged tag in dest, of id, for the
// push of what (a recipe, a model file), its renewals saying phase.
func (e *Engine) publishUnderLease(what, tag, dest, id, phase string) func(pushed bool) {
	pushing := lease.Progress{Percent: -1, Left: -1, Phase: phase}
	ev := heallog.Event{Event: heallog.FleetLease, Tool: what, Target: stash.Redact(dest), Result: "released"}
	board, err := e.leaseBoard(dest)
	var held *lease.Held
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
		l := &lease.Lease{Board: board, Tag: tag, Period: e.c.M.Stash.Lease.D()}
		held, err = l.Adopt(ctx, id)
		cancel()
	}
	if err == nil {
		// At once: the build or download stops renewing once it has
		// started this process, which runs at low priority.
		ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
		err = held.Renew(ctx, pushing)
		cancel()
	}
	if err != nil {
		return func(bool) {
			ev.Level, ev.Result, ev.Reason = "warn", "unavailable", "the push could not hold it: "+units.OneLine(err)
			e.Event(ev)
		}
	}
	held.Keep(func() lease.Progress { return pushing }, nil)
	return func(pushed bool) {
		how := lease.Failed
		if pushed {
			how = lease.Published
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*registryTimeout)
		defer cancel()
		ev.Reason = string(how)
		if err := held.Release(ctx, how); err != nil {
			ev.Level, ev.Reason = "warn", string(how)+"; the release failed: "+units.OneLine(err)
		}
		e.Event(ev)
	}
}
