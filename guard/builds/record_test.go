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
