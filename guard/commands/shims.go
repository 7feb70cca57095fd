package commands

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/install"
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
		out = append(out, ShimState{name, "stale"})
	}
	return out
}

func shimState(dir, name string) ShimState {
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return ShimState{name, "missing"}
	case name == install.GuardName && install.CopyProblem(p) != "":
		return ShimState{name, "broken"} // empty or cut off: every shim would run nothing, or crash
	case name == install.GuardName:
		return ShimState{name, "ok"}
	case fi.Mode()&os.ModeSymlink == 0:
		return ShimState{name, "not-guard"}
	}
	if _, err := os.Stat(p); err != nil {
		return ShimState{name, "dangling"}
	}
	if !install.IsGuardLink(dir, name) {
		return ShimState{name, "not-guard"}
	}
	return ShimState{name, "ok"}
}

// staleLinks are the links to guard in the shim folder whose names the
// manifest no longer has (a tool removed from it), in order.
func staleLinks(c *guard.Config) []string {
	entries, err := os.ReadDir(c.ShimDir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if name == install.GuardName || c.M.Tools[name] != nil || e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if install.IsGuardLink(c.ShimDir, name) {
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
