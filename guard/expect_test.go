package guard

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A call that finds a build from nothing running (the stash and the build
// folder gone) says the time left from the last build from nothing, not
// from the last incremental one (issue 36: "about 48-50 s left" for a
// cold build of 7 min 13 s).
func TestAColdBuildIsExpectedToTakeTheLastColdBuild(t *testing.T) {
	b := newBed(t, `
[builds.r]
dir = "$DIR/src"
steps = [["make"]]

[tools.t]
path = "$DIR/src/build/t"
build = "r"
`)
	builds := filepath.Join(b.dir, "state", "builds")
	if err := os.MkdirAll(builds, 0o700); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Format(time.RFC3339Nano)
	os.WriteFile(filepath.Join(builds, "r.cold"), []byte("7m13s "+at+"\n"), 0o600)
	os.WriteFile(filepath.Join(builds, "r.last"), []byte("48s "+at+"\n"), 0o600)
	os.MkdirAll(filepath.Join(b.dir, "src"), 0o755)

	rec, err := b.e.jobRecord(jobSpec{kind: "tool", name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Left() != 7*time.Minute+13*time.Second {
		t.Errorf("from nothing: %v left, want the last build from nothing, 7m13s", rec.Left())
	}
	os.MkdirAll(filepath.Join(b.dir, "src", "build"), 0o755)
	os.WriteFile(filepath.Join(b.dir, "src", "build", "lib.o"), nil, 0o644)
	if rec, _ = b.e.jobRecord(jobSpec{kind: "tool", name: "t"}); rec.Left() != 48*time.Second {
		t.Errorf("incremental: %v left, want the last build's 48s", rec.Left())
	}
}
