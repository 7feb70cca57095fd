package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// profileName is guard's file in /etc/profile.d.
const profileName = "guard.sh"

// installSystem is the --system part of an install, for root sandboxes: a
// link in a folder ahead of the real tools on every default PATH (cron's
// and su's excepted: docs/shells.md) for each tool
// whose real binary is not in that folder, and a start-up file every login
// shell reads. Each link points at the tool's own name in the shim folder,
// a system folder every user can read, never at guard's copy: what
// resolves the link to its real path must still see the tool's name
// (docs/shells.md, "OpenClaw"). A link an older install made to the copy
// is moved over.
func installSystem(o Options, r *Report) error {
	s := o.System
	old := filepath.Join(o.ShimDir, GuardName)
	for _, name := range o.Tools {
		p := filepath.Join(s.BinDir, name)
		target := filepath.Join(o.ShimDir, name)
		if Classify(o.ShimDir, name) != Linked {
			continue // install said why the shim folder has no link of guard's there
		}
		t, err := os.Readlink(p)
		switch {
		case err == nil && t == target:
			continue
		case err == nil && t == old:
		case err == nil || !errors.Is(err, fs.ErrNotExist):
			if _, lerr := os.Lstat(p); lerr == nil {
				r.skip("%s: the real %s is there, so guard reaches it only through the PATH block", p, name)
				continue
			}
		}
		if err := os.MkdirAll(s.BinDir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", s.BinDir, err)
		}
		if err := symlinkAtomic(target, p); err != nil {
			return err
		}
		r.did("linked %s -> %s", p, target)
	}
	changed, err := writeHook(filepath.Join(s.ProfileD, profileName), systemProfile(o))
	if err != nil {
		return err
	}
	if changed {
		r.did("wrote %s", filepath.Join(s.ProfileD, profileName))
	}
	return nil
}

// systemProfile is /etc/profile.d/guard.sh: the PATH block with absolute
// paths, since every user's login shell reads it. Only the person who ran
// the install can read its restore script; anyone else whose copy is gone
// gets the loud line.
func systemProfile(o Options) string {
	guard := filepath.Join(o.ShimDir, GuardName)
	b := blockSpec{
		shimDir: shellQuote(o.ShimDir), guard: shellQuote(guard), stamp: shellQuote(filepath.Join(o.ShimDir, CopyStamp)),
		restore: shellQuote(o.hooks().restore()), off: offLine(guard, o.Restore),
	}
	if o.Prewarm {
		b.prewarm = shellQuote(o.hooks().prewarm())
	}
	return hookHeader + " shims first in PATH for every login shell; written by guard install --system\n" + b.block()
}

// uninstallSystem takes back what installSystem added, recognising it by
// what it points at: a link in BinDir to the same name in this shim folder
// (or, made by an older install, to guard's copy there), and a profile.d
// file of guard's that names the copy.
func uninstallSystem(o Options, r *Report) error {
	s := o.System
	target := filepath.Join(o.ShimDir, GuardName)
	entries, err := os.ReadDir(s.BinDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", s.BinDir, err)
	}
	for _, e := range entries {
		p := filepath.Join(s.BinDir, e.Name())
		if t, err := os.Readlink(p); err == nil && (t == target || t == filepath.Join(o.ShimDir, e.Name())) {
			if err := os.Remove(p); err != nil {
				return fmt.Errorf("remove link: %w", err)
			}
			r.did("removed %s", p)
		}
	}
	p := filepath.Join(s.ProfileD, profileName)
	if b, err := readUserFile(p); err == nil && strings.Contains(string(b), shellQuote(target)) && removeHook(p) {
		r.did("removed %s", p)
	}
	return nil
}
