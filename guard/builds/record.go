package builds

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// A recipe's last good run is kept in STATE/builds/NAME.last, a line that
// survives the eviction of everything the build made: what a rebuild costs
// (`guard status`, `guard heal --dry-run`), and whether the recipe was ever
// built here at all (a fresh install is not an emergency).

// Last is a recipe's last run that ended well here.
type Last struct {
	Took time.Duration
	At   time.Time
}

func lastPath(stateDir, name string) string {
	return filepath.Join(state.Layout{Dir: stateDir}.Builds(), safeName(name)+".last")
}

// A build from nothing (FromNothing: its output folders missing or empty,
// as after a clone, or once the stash and the build folder are gone) takes
// many times an incremental one: the real llama.cpp, 7 min 13 s against
// 48 s. So its last good run is kept apart too, in STATE/builds/NAME.cold,
// and the time left of a build is expected from the last good run of its
// own kind (Expected).

func coldPath(stateDir, name string) string {
	return filepath.Join(state.Layout{Dir: stateDir}.Builds(), safeName(name)+".cold")
}

// LastBuild reads the record of recipe name's last good run; ok is false
// when it never ended well here (or the record is unreadable).
func LastBuild(stateDir, name string) (Last, bool) {
	return readLast(lastPath(stateDir, name))
}

// LastColdBuild reads the record of recipe name's last good run from
// nothing; ok is false when there was none here.
func LastColdBuild(stateDir, name string) (Last, bool) {
	return readLast(coldPath(stateDir, name))
}

// FromNothing reports whether a build of rec would start from nothing:
// none of its output folders holds anything (or rec.Dir is gone). A
// recipe that names no output folder is never taken for one.
func FromNothing(rec *manifest.Build) bool {
	if len(rec.Outputs) == 0 {
		return false // no output folder to tell by
	}
	for _, out := range rec.Outputs {
		f, err := os.Open(filepath.Join(rec.Dir, out))
		if err != nil {
			continue
		}
		names, _ := f.Readdirnames(1)
		f.Close()
		if len(names) > 0 {
			return false
		}
	}
	return true
}

// Expected is how long a build of rec is expected to take now: the last
// good build from nothing when this one starts from nothing, else the last
// good build. ok is false when there is none of that kind to go by: a
// build from nothing is never expected to take what an incremental one
// took.
func Expected(stateDir string, rec *manifest.Build) (time.Duration, bool) {
	last, ok := LastBuild(stateDir, rec.Name)
	if FromNothing(rec) {
		last, ok = LastColdBuild(stateDir, rec.Name)
	}
	return last.Took, ok
}

func readLast(path string) (Last, bool) {
	data, ok := readSmall(path)
	if !ok {
		return Last{}, false
	}
	took, at, _ := strings.Cut(strings.TrimSpace(data), " ")
	d, err := time.ParseDuration(took)
	when, err2 := time.Parse(time.RFC3339Nano, at)
	if err != nil || err2 != nil || d < 0 {
		return Last{}, false
	}
	return Last{Took: d, At: when}, true
}

// recordBuild writes the record, and the record of builds from nothing
// when cold; failures are ignored, since the record only ever informs.
func (b *Builder) recordBuild(name string, took time.Duration, at time.Time, cold bool) {
	line := took.String() + " " + at.UTC().Format(time.RFC3339Nano) + "\n"
	_ = state.Replace(lastPath(b.StateDir, name), []byte(line), 0o600)
	if cold {
		_ = state.Replace(coldPath(b.StateDir, name), []byte(line), 0o600)
	}
}

// Stamped reports whether binary passed CheckBinary here once: its stamp
// outlives the binary, so a missing binary with a stamp was evicted, and
// one without was never here.
func Stamped(stampDir, binary string) bool {
	_, err := os.Lstat(stampPath(stampDir, state.Abs(binary)))
	return err == nil
}
