package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/state"
)

// Repair is the per-call self-repair: one stat per expected link, a read
// of guard's copy's ELF header (an empty or cut-off copy is as good as
// gone), and only when something is gone, the fix. It returns the names it re-created. It
// does nothing when guard was never installed here (no shim folder and no
// install marker), so running a guard binary from a build folder does not
// create a shim folder behind the user's back.
func Repair(shimDir, stateDir, self string, tools []string) ([]string, error) {
	names := append([]string{GuardName}, tools...)
	if len(missingShims(shimDir, names)) == 0 {
		return nil, nil
	}
	if _, err := os.Stat(shimDir); errors.Is(err, fs.ErrNotExist) {
		// The marker names the folder install put guard in: a call that
		// was told another folder must not build a second one.
		if installed, _ := Recorded(stateDir); installed != shimDir {
			return nil, nil
		}
	}
	// Twenty agent calls after an eviction would each mend the folder (and
	// log it) without the lock; with it the first mends and the others find
	// nothing left to do. A state folder that cannot hold the lock must not
	// stop the repair.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if held, err := lock.Acquire(ctx, state.Layout{Dir: stateDir}.Lock("shims"), nil); err == nil {
		defer held.Release()
	}
	missing := missingShims(shimDir, names)
	if len(missing) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(shimDir, 0o755); err != nil {
		return nil, err
	}
	var done []string
	for _, name := range missing {
		p := filepath.Join(shimDir, name)
		if name == GuardName {
			exe, err := os.ReadFile(self)
			if err != nil {
				return done, fmt.Errorf("read guard executable: %w", err)
			}
			if err := copyGuard(exe, p); err != nil {
				return done, err
			}
			done = append(done, name)
			continue
		}
		// A regular file stays (the user put it there); a missing entry or
		// a dangling link is ours to mend.
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		if err := symlinkAtomic(GuardName, p); err != nil {
			return done, err
		}
		done = append(done, name)
	}
	return done, nil
}

func missingShims(shimDir string, names []string) []string {
	var missing []string
	for _, name := range names {
		p := filepath.Join(shimDir, name)
		if _, err := os.Stat(p); err != nil || (name == GuardName && CopyProblem(p) != "") {
			missing = append(missing, name)
		}
	}
	return missing
}
