package builds

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
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

// LastBuild reads the record of recipe name's last good run; ok is false
// when it never ended well here (or the record is unreadable).
func LastBuild(stateDir, name string) (Last, bool) {
	data, ok := readSmall(lastPath(stateDir, name))
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

// recordBuild writes the record; failures are ignored, since the record
// only ever informs.
func (b *Builder) recordBuild(name string, took time.Duration, at time.Time) {
	line := took.String() + " " + at.UTC().Format(time.RFC3339Nano) + "\n"
	_ = state.Replace(lastPath(b.StateDir, name), []byte(line), 0o600)
}

// Stamped reports whether binary passed CheckBinary here once: its stamp
// outlives the binary, so a missing binary with a stamp was evicted, and
// one without was never here.
func Stamped(stampDir, binary string) bool {
	_, err := os.Lstat(stampPath(stampDir, absPath(binary)))
	return err == nil
}
