package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// A model once per fleet (docs/fleet-lease.md): a model whose push_to
// registry tag is also the first of its urls (the manifest holds it so)
// is downloaded from its other urls by
// one sandbox, which holds the fleet's lease on it, renews it with how far
// its download is, and pushes the file there in the background once it is
// verified; the push lets the lease go. The others wait on the lease,
// saying who downloads and how far, and download from the registry once
// the file is there. As for builds, a registry that cannot hold a lease
// leaves each to download on its own.

// LeaseTag is the tag, in push_to's repository, of the fleet's lease on
// downloading the model pushed to push_to.
func LeaseTag(pushTo string) string {
	h := sha256.Sum256([]byte("model\x00" + pushTo))
	return "lease-model-" + hex.EncodeToString(h[:16])
}

// fleetLease is the fleet's lease on m's download; nil when m's download
// does not go through one.
func (h *Healer) fleetLease(m *manifest.Model) (*lease.Lease, error) {
	if h.Fleet == nil || h.PushTo == nil || m.PushTo == "" || !slices.Contains(m.URLs, m.PushTo) {
		return nil, nil
	}
	board, err := h.Fleet.Board(m.PushTo)
	if err != nil {
		return nil, err
	}
	return &lease.Lease{Board: board, Tag: LeaseTag(m.PushTo), Period: h.Fleet.Period}, nil
}

// takeTurn is the fleet's lease before m's download: the lease this
// sandbox holds when it downloads for the fleet, or nil when the model is
// in the registry now (the download takes it from there), or this sandbox
// downloads on its own.
func (h *Healer) takeTurn(ctx context.Context, m *manifest.Model, dest string) *lease.Held {
	l, err := h.fleetLease(m)
	if l == nil && err == nil {
		return nil
	}
	ev := heallog.Event{Event: heallog.FleetLease, Tool: m.File, Target: m.PushTo}
	if err != nil {
		h.unavailable(ev, err)
		return nil
	}
	if _, _, _, err := h.resolve(ctx, m.PushTo, m); err == nil {
		return nil // pushed already: the download takes it from the registry
	}
	var rep *progress.Reporter
	var holder lease.Record
	defer func() {
		if rep != nil {
			rep.Stop("")
		}
	}()
	held, got, why := lease.Turn{
		Lease:   l,
		Me:      h.Fleet.Me("download of " + m.File),
		CanHold: h.Fleet.CanPublish == nil || h.Fleet.CanPublish(),
		Found: func(ctx context.Context) (bool, error) {
			_, _, _, err := h.resolve(ctx, m.PushTo, m)
			return err == nil, nil // a registry that does not answer yet is the lease's to judge
		},
		Waiting: func(r lease.Record) {
			holder = r
			if rep == nil {
				ev.Result, ev.Reason = "waited", fmt.Sprintf("%s (pid %d) holds it", r.Host, r.PID)
				h.event(ev)
				h.say("guard: model %s is being downloaded by %s (pid %d) for the fleet (%s); waiting for it in %s", m.File, r.Host, r.PID, r.Where(), m.PushTo)
				rep = progress.Start(h.Stderr, "waiting for "+m.File, 0, h.Pace)
			}
			rep.Show(progress.Snapshot{Percent: r.Percent, Left: r.Left(), Status: "downloaded by " + r.Host + " " + lease.ForTheFleet})
		},
	}.Take(ctx)
	switch {
	case got:
		h.say("guard: model %s was pushed to %s by %s for the fleet; downloading it from there", m.File, m.PushTo, holder.Host)
	case held != nil:
		ev.Result = "taken"
		if was := held.TookOver; was != nil {
			ev.Result, ev.Reason = "taken over", fmt.Sprintf("from %s (pid %d), not renewed for its period", was.Host, was.PID)
		}
		h.event(ev)
		h.say("guard: downloading model %s for the fleet (its lease in %s)", m.File, m.PushTo)
		held.Keep(func() lease.Progress {
			p := lease.Progress{Percent: -1, Left: -1, Phase: "downloading"}
			if m.Size > 0 {
				p.Percent = float64(fetch.PartialBytes(dest)) * 100 / float64(m.Size)
			}
			return p
		}, nil)
		return held
	case ctx.Err() != nil:
	case why != nil:
		if r, ok := lease.IsAbandoned(why); ok {
			h.say("guard: %s's download of %s for the fleet failed; downloading here", r.Host, m.File)
		} else {
			h.unavailable(ev, why)
		}
	}
	return nil
}

// unavailable says that the registry cannot hold the lease: this sandbox
// downloads on its own.
func (h *Healer) unavailable(ev heallog.Event, err error) {
	ev.Level, ev.Result, ev.Reason = "warn", "unavailable", units.OneLine(err)
	h.event(ev)
	h.say("guard: the fleet's registry %s cannot hold a lease on downloading %s (%s); downloading here", ev.Target, ev.Tool, units.OneLine(err))
}

// publish ends this sandbox's part in the lease after its download: a
// good one is pushed to m's push_to in the background, the push holding
// the lease and letting it go; a failed one, or one whose push cannot
// start, lets it go as failed at once. A download that stopped for a
// trouble that passes (the heal's time ran out, a signal, every source
// stalled, another process of this sandbox downloading) only stops
// renewing it: another sandbox takes it over after its period and
// downloads, rather than every waiter going to the source at once.
func (h *Healer) publish(m *manifest.Model, path string, held *lease.Held, err error) {
	if held == nil {
		return
	}
	var stalled *StalledError
	if err != nil && (errors.Is(err, fetch.ErrBusy) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.As(err, &stalled)) {
		held.Stop()
		return
	}
	ev := heallog.Event{Event: heallog.FleetLease, Tool: m.File, Target: m.PushTo, Result: "released", Reason: string(lease.Failed)}
	if err == nil {
		// Started while this process still renews the lease: the push,
		// which takes it over as it starts, has the rest of the period
		// since the last renewal (two thirds at least) to do so.
		perr := h.PushTo(filepath.Clean(path), m.PushTo, held.Record().ID)
		held.Stop()
		if perr == nil {
			return
		}
		h.say("guard: cannot push model %s to %s: %s", m.File, m.PushTo, units.OneLine(perr))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if rerr := held.Release(ctx, lease.Failed); rerr != nil {
		ev.Level, ev.Reason = "warn", "failed; the release itself failed: "+units.OneLine(rerr)
	}
	h.event(ev)
}
