package models

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/manifest"
)

// mapBoard is a lease board in memory.
type mapBoard struct {
	mu   sync.Mutex
	recs map[string]lease.Record
}

func (b *mapBoard) Read(_ context.Context, tag string) (lease.Record, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.recs[tag]
	return r, ok, nil
}

func (b *mapBoard) Write(_ context.Context, tag string, r lease.Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs[tag] = r
	return nil
}

// After the download for the fleet: a good one is handed to the push with
// the lease's id; a failed one lets the lease go as failed; one stopped
// for a trouble that passes (time, a signal, a stall, another process
// downloading) leaves the lease to expire, for another to take over.
func TestPublishAfterTheDownload(t *testing.T) {
	t.Parallel()
	m := &manifest.Model{File: "m.gguf", Size: 4, PushTo: "oci://r.lan/fleet/m:q"}
	for _, c := range []struct {
		name    string
		err     error
		pushErr error
		want    lease.Ended // "" = not let go
		pushed  bool
	}{
		{"good", nil, nil, "", true},
		{"good, but the push cannot start", nil, errors.New("no jobs folder"), lease.Failed, false},
		{"failed", errors.New("404 from every url"), nil, lease.Failed, false},
		{"timeout", fmt.Errorf("heal: %w", context.DeadlineExceeded), nil, "", false},
		{"signal", context.Canceled, nil, "", false},
		{"stalled", &StalledError{Model: "m.gguf", Err: errors.New("stalled")}, nil, "", false},
		{"busy", fetch.ErrBusy, nil, "", false},
	} {
		board := &mapBoard{recs: map[string]lease.Record{}}
		var pushedID string
		h := &Healer{
			Fleet:  &lease.Fleet{Period: time.Minute, Host: "me", Board: func(string) (lease.Board, error) { return board, nil }},
			PushTo: func(_, _, id string) error { pushedID = id; return c.pushErr },
		}
		l, err := h.fleetLease(&manifest.Model{File: m.File, PushTo: m.PushTo, URLs: []string{m.PushTo}})
		if err != nil || l == nil {
			t.Fatalf("%s: no lease (%v)", c.name, err)
		}
		l.Settle = time.Millisecond
		held, _, _, err := l.Take(context.Background(), h.Fleet.Me("download of m.gguf"))
		if err != nil || held == nil {
			t.Fatalf("%s: take: %v", c.name, err)
		}
		h.publish(m, "/models/m.gguf", held, c.err)
		r, _, _ := board.Read(context.Background(), LeaseTag(m.PushTo))
		if r.Ended != c.want {
			t.Errorf("%s: the lease ended %q, want %q", c.name, r.Ended, c.want)
		}
		if got := pushedID == held.Record().ID; got != (c.pushed || c.pushErr != nil) {
			t.Errorf("%s: the push was handed lease %q (holder %q)", c.name, pushedID, held.Record().ID)
		}
	}
}

// The push is started while this process still renews the lease, which the
// push takes over as it starts: a push slow to start (a loaded machine)
// finds the lease fresh instead of one gone unrenewed since the download
// ended, which another sandbox would take over and download again.
func TestPushStartsWhileTheLeaseIsRenewed(t *testing.T) {
	t.Parallel()
	m := &manifest.Model{File: "m.gguf", Size: 4, PushTo: "oci://r.lan/fleet/m:q", URLs: []string{"oci://r.lan/fleet/m:q"}}
	board := &mapBoard{recs: map[string]lease.Record{}}
	seq := func() int64 {
		r, _, _ := board.Read(context.Background(), LeaseTag(m.PushTo))
		return r.Seq
	}
	renewed := false
	h := &Healer{
		Fleet: &lease.Fleet{Period: 300 * time.Millisecond, Host: "me", Board: func(string) (lease.Board, error) { return board, nil }},
		PushTo: func(_, _, _ string) error {
			// Up to Within's limit for a renewal by the holder.
			at := seq()
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if seq() > at {
					renewed = true
					break
				}
			}
			return nil
		},
	}
	l, err := h.fleetLease(m)
	if err != nil || l == nil {
		t.Fatalf("no lease (%v)", err)
	}
	l.Settle = time.Millisecond
	held, _, _, err := l.Take(context.Background(), h.Fleet.Me("download of m.gguf"))
	if err != nil || held == nil {
		t.Fatalf("take: %v", err)
	}
	held.Keep(func() lease.Progress { return lease.Progress{Percent: 100, Left: 0, Phase: "downloading"} }, nil)
	h.publish(m, "/models/m.gguf", held, nil)
	if !renewed {
		t.Fatal("the lease was not renewed once the push had started: the push finds it as old as the download's end")
	}
	at := seq()
	time.Sleep(400 * time.Millisecond) // more than a tick: none comes after publish
	if seq() != at {
		t.Error("the lease was still renewed after publish returned")
	}
}
