package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestShimSmoke runs the start-up table for real with one sample a row:
// it builds guard, the floors and the spawn helper, installs guard in a
// sandbox, probes its paths and times every row. The figures mean nothing
// here; that every row runs and the probe finds guard's two paths does.
func TestShimSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds guard (half a minute with a cold build cache)")
	}
	repo, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	var log bytes.Buffer
	rn := &Runner{Repo: repo, Root: t.TempDir(), Knobs: Knobs{Runs: 1, Rounds: 1, Warmup: 0}, Log: &log}
	rep, err := rn.Run(context.Background(), shimTable())
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var out bytes.Buffer
	if err := rep.Format(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if len(rep.Results) != len(shimTable().Rows) {
		t.Fatalf("%d results for %d rows", len(rep.Results), len(shimTable().Rows))
	}
	paths := map[string]string{"guard-plain": "exec", "guard-npx": "supervised", "guard-slowtool": "supervised", "guard-cache-hit": "cache hit"}
	for _, r := range rep.Results {
		if r.Skipped != "" || r.Summary.N != 1 || r.Summary.Median <= 0 || r.Summary.MaxRSS <= 0 {
			t.Errorf("%s: skipped %q, %+v", r.Name, r.Skipped, r.Summary)
		}
		if want, ok := paths[r.Name]; ok && (r.Goal == nil || !strings.HasPrefix(r.Goal.What, want+" ")) {
			t.Errorf("%s: goal %v, want guard's %s path", r.Name, r.Goal, want)
		}
	}
	// Only the cache-hit row may log (a hit is an event); and the log is
	// the sandbox's, never the real one.
	if log := rep.Notes[len(rep.Notes)-1]; !strings.HasPrefix(log, "guard's heal log: 2 events (cache.hit 1, cache.store 1)") {
		t.Errorf("heal log note %q, want the cache's two events alone", log)
	}
	if home != "" {
		if _, err := os.Stat(home + "/.shim/plain"); err == nil {
			t.Errorf("a shim named plain appeared in the real %s/.shim", home)
		}
	}
}
