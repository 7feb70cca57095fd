package builds

import (
	"os"
	"time"
)

// SlowChecks is how many full ELF inspections CheckBinary has done.
func SlowChecks() int64 { return slowChecks.Load() }

// SetEUID makes b believe it runs as uid.
func (b *Builder) SetEUID(uid int) { b.geteuid = func() int { return uid } }

var ParseLDConf = parseLDConf

// ScrubPartial is the scrub of one folder, dir, as scrubOutputs runs it
// on each output folder.
func ScrubPartial(dir string, since time.Time) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	got, err := scrubRoot(root, dir, since)
	var paths []string
	for _, r := range got {
		paths = append(paths, r.path)
	}
	return paths, err
}

// SetBeforeScrubRemove runs f just before each removal of the scrub; the
// result restores.
func SetBeforeScrubRemove(f func(path string)) (restore func()) {
	old := beforeScrubRemove
	beforeScrubRemove = f
	return func() { beforeScrubRemove = old }
}

// MarkerPath is the interrupted-build marker of the recipe named name.
func (b *Builder) MarkerPath(name string) string { return b.markerPath(name) }
