package builds_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/manifest"
)

// A recipe that ran to a good end here is remembered with how long it
// took, so status and heal --dry-run can say what a rebuild costs, and tell
// a build that was never made here from one whose outputs were evicted. A
// failed run leaves the last good one in place.
func TestLastBuild(t *testing.T) {
	b, _, _ := newBuilder(t, "")
	if _, ok := builds.LastBuild(b.StateDir, "r"); ok {
		t.Fatal("a recipe never run has a last build")
	}
	rec := &manifest.Build{Name: "r", Dir: t.TempDir(), Steps: [][]string{{"sleep", "0.2"}}}
	before := time.Now()
	if err := b.Build(context.Background(), "x", rec, ""); err != nil {
		t.Fatal(err)
	}
	last, ok := builds.LastBuild(b.StateDir, "r")
	if !ok || last.Took < 200*time.Millisecond || last.Took > time.Minute || last.At.Before(before.Add(-time.Second)) {
		t.Fatalf("last build %+v, %v; want about 0.2s, just now", last, ok)
	}
	rec.Steps = [][]string{{"false"}}
	if err := b.Build(context.Background(), "x", rec, ""); err == nil {
		t.Fatal("a failing step passed")
	}
	if again, ok := builds.LastBuild(b.StateDir, "r"); !ok || again != last {
		t.Fatalf("a failed run changed the last good build: %+v, %v", again, ok)
	}
}

// A binary that passed CheckBinary here once keeps its stamp when it is
// evicted: Stamped tells "was here" from "never was".
func TestStamped(t *testing.T) {
	stamps := t.TempDir()
	bin := filepath.Join(t.TempDir(), "tool")
	if builds.Stamped(stamps, bin) {
		t.Fatal("a binary never checked is stamped")
	}
	guardtest.WriteFile(t, bin, "#!/bin/sh\n", 0o755)
	if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
		t.Fatal(h.Reason)
	}
	os.Remove(bin)
	if !builds.Stamped(stamps, bin) {
		t.Fatal("an evicted binary lost its stamp")
	}
}

// A build from nothing (its output folder empty or gone) is expected to
// take what the last build from nothing took, never what the last
// incremental one did (issue 36).
func TestABuildFromNothingExpectsTheLastFromNothing(t *testing.T) {
	b, _, _ := newBuilder(t, "")
	dir := t.TempDir()
	rec := &manifest.Build{Name: "r", Dir: dir, Outputs: []string{"build"},
		Steps: [][]string{{"sh", "-c", "mkdir -p build && touch build/lib.so"}}}
	if !builds.FromNothing(rec) {
		t.Fatal("a build with no build folder is not from nothing")
	}
	if _, ok := builds.Expected(b.StateDir, rec); ok {
		t.Fatal("an expectation before any build")
	}
	if err := b.Build(context.Background(), "x", rec, ""); err != nil {
		t.Fatal(err)
	}
	cold, ok := builds.LastColdBuild(b.StateDir, "r")
	if !ok {
		t.Fatal("a build from nothing was not recorded as one")
	}
	if builds.FromNothing(rec) {
		t.Fatal("a full build folder is taken for nothing")
	}
	if err := b.Build(context.Background(), "x", rec, ""); err != nil { // incremental
		t.Fatal(err)
	}
	last, _ := builds.LastBuild(b.StateDir, "r")
	if again, _ := builds.LastColdBuild(b.StateDir, "r"); again != cold || !last.At.After(cold.At) {
		t.Fatalf("an incremental build changed the record from nothing: %+v, last %+v", again, last)
	}
	if d, ok := builds.Expected(b.StateDir, rec); !ok || d != last.Took {
		t.Errorf("incremental: expected %v, %v; want the last build's %v", d, ok, last.Took)
	}
	os.RemoveAll(filepath.Join(dir, "build"))
	if d, ok := builds.Expected(b.StateDir, rec); !ok || d != cold.Took {
		t.Errorf("from nothing: expected %v, %v; want the last from nothing, %v", d, ok, cold.Took)
	}
	os.Mkdir(filepath.Join(dir, "build"), 0o755) // empty is nothing too
	if !builds.FromNothing(rec) {
		t.Error("an empty build folder is not from nothing")
	}
}
