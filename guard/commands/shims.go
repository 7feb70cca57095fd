package commands

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/state"
)

// installed reports whether guard is installed here, by the rule the
// per-call repair follows: the shim folder exists or the state folder has
// the install marker. After `guard uninstall` neither does, and only
// `guard install` brings the shims back.
func installed(c *guard.Config) bool {
	if _, err := os.Stat(c.ShimDir); err == nil {
		return true
	}
	_, err := os.Stat(c.State().Installed())
	return err == nil
}

// shimStates lists guard's copy, a link for each manifest tool, and the
// links guard made for tools the manifest no longer has ("stale").
func shimStates(c *guard.Config) []ShimState {
	out := []ShimState{shimState(c.ShimDir, install.GuardName)}
	for _, name := range sortedKeys(c.M.Tools) {
		out = append(out, shimState(c.ShimDir, name))
	}
	for _, name := range staleLinks(c) {
		out = append(out, ShimState{name, StateStale})
	}
	return out
}

func shimState(dir, name string) ShimState {
	p := filepath.Join(dir, name)
	if name == install.GuardName {
		switch fi, err := os.Lstat(p); {
		case err != nil:
			return ShimState{name, StateMissing}
		case !fi.Mode().IsRegular():
			return ShimState{name, StateNotGuard} // a link or other file in the copy's place
		case install.CopyProblem(p) != "":
			return ShimState{name, StateBroken} // empty or cut off: every shim would run nothing, or crash
		}
		return ShimState{name, StateOK}
	}
	switch install.Classify(dir, name) {
	case install.Missing:
		return ShimState{name, StateMissing}
	case install.Linked:
		return ShimState{name, StateOK}
	case install.Outdated:
		return ShimState{name, StateOutdated}
	}
	return ShimState{name, StateNotGuard}
}

// staleLinks are guard's links in the shim folder whose names the
// manifest no longer has (a tool removed from it), in order. The names of
// guard's own files there (its copy, the stamps, a link half made) are
// never tools.
func staleLinks(c *guard.Config) []string {
	entries, err := os.ReadDir(c.ShimDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if name == install.GuardName || name == install.CopyStamp || name == install.LinksStamp || strings.HasPrefix(name, state.TempPrefix) || c.M.Tools[name] != nil {
			continue
		}
		if install.IsGuards(c.ShimDir, name) {
			out = append(out, name)
		}
	}
	return out
}

// removeStaleLinks removes the stale links and returns the names removed.
// A link that changed meanwhile (no longer guard's) stays.
func removeStaleLinks(c *guard.Config) ([]string, error) {
	var removed []string
	var errs []error
	for _, name := range staleLinks(c) {
		if err := os.Remove(filepath.Join(c.ShimDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
