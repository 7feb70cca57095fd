// Package install puts guard in the shim folder and takes it out again:
// a copy of the guard executable (so a deleted build folder cannot break the
// shims), one relative symlink per manifest tool, the default manifest when
// the user has none, and a marked PATH block in ~/.bashrc and ~/.profile.
// Every step checks before it writes, so running install twice changes
// nothing. Repair is the cheap pass every guard call makes to bring back
// links a sandbox evicted.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-guard/guard/guard/state"
)

// GuardName is the name of guard's own copy in the shim folder.
const GuardName = "guard"

// Options says where things go. Nothing here reads the environment.
type Options struct {
	Home            string
	ShimDir         string
	StateDir        string
	Self            string   // guard's own executable (os.Executable)
	Tools           []string // names to link to guard
	ManifestPath    string   // where the user manifest lives
	DefaultManifest []byte
	NoRC            bool // leave ~/.bashrc and ~/.profile alone
	Force           bool // replace files in the shim folder that are not guard's links
}

// Report lists what Install or Uninstall did, one line a change.
type Report struct {
	Changes []string
	Skipped []string
}

func (r *Report) did(format string, a ...any) {
	r.Changes = append(r.Changes, fmt.Sprintf(format, a...))
}
func (r *Report) skip(format string, a ...any) {
	r.Skipped = append(r.Skipped, fmt.Sprintf(format, a...))
}

// Install does every step; it stops at the first error, having said what it
// had done by then in the report.
func Install(o Options) (*Report, error) {
	r := &Report{}
	if err := os.MkdirAll(o.ShimDir, 0o755); err != nil {
		return r, fmt.Errorf("create shim folder: %w", err)
	}
	copied, err := copyIfChanged(o.Self, filepath.Join(o.ShimDir, GuardName), o.Force)
	if err != nil {
		return r, err
	}
	if copied {
		r.did("copied guard to %s", filepath.Join(o.ShimDir, GuardName))
	}
	for _, name := range o.Tools {
		changed, err := link(o.ShimDir, name, o.Force)
		switch {
		case errors.Is(err, errNotOurs):
			r.skip("%s: %v (use --force to replace it)", filepath.Join(o.ShimDir, name), err)
		case err != nil:
			return r, err
		case changed:
			r.did("linked %s -> %s", filepath.Join(o.ShimDir, name), GuardName)
		}
	}
	if o.ManifestPath != "" {
		if _, err := os.Stat(o.ManifestPath); errors.Is(err, fs.ErrNotExist) {
			if err := writeUserFile(o.ManifestPath, o.DefaultManifest, 0o644); err != nil {
				return r, fmt.Errorf("write default manifest: %w", err)
			}
			r.did("wrote the default manifest to %s", o.ManifestPath)
		}
	}
	if !o.NoRC {
		for _, rc := range []string{".bashrc", ".profile"} {
			changed, err := addBlock(filepath.Join(o.Home, rc), pathBlock(o.Home, o.ShimDir))
			if err != nil {
				return r, err
			}
			if changed {
				r.did("added the PATH block to %s", filepath.Join(o.Home, rc))
			}
		}
	}
	marker := state.Layout{Dir: o.StateDir}.Installed()
	if b, _ := os.ReadFile(marker); string(b) != o.ShimDir+"\n" {
		if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
			return r, fmt.Errorf("record install: %w", err)
		}
		if err := state.Replace(marker, []byte(o.ShimDir+"\n"), 0o600); err != nil {
			return r, fmt.Errorf("record install: %w", err)
		}
	}
	return r, nil
}

// Uninstall removes exactly what Install added: guard's links, its copy, the
// PATH blocks and the install marker. Models, cache, log and manifest stay.
func Uninstall(o Options) (*Report, error) {
	r := &Report{}
	entries, err := os.ReadDir(o.ShimDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("read shim folder: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(o.ShimDir, e.Name())
		if t, err := os.Readlink(p); err == nil && (t == GuardName || t == filepath.Join(o.ShimDir, GuardName)) {
			if err := os.Remove(p); err != nil {
				return r, fmt.Errorf("remove link: %w", err)
			}
			r.did("removed %s", p)
		}
	}
	if err := os.Remove(filepath.Join(o.ShimDir, GuardName)); err == nil {
		r.did("removed %s", filepath.Join(o.ShimDir, GuardName))
	}
	if os.Remove(o.ShimDir) == nil { // only when empty
		r.did("removed %s", o.ShimDir)
	}
	for _, rc := range []string{".bashrc", ".profile"} {
		changed, err := removeBlock(filepath.Join(o.Home, rc))
		if err != nil {
			return r, err
		}
		if changed {
			r.did("removed the PATH block from %s", filepath.Join(o.Home, rc))
		}
	}
	_ = os.Remove(state.Layout{Dir: o.StateDir}.Installed())
	return r, nil
}

var errNotOurs = errors.New("a file that is not guard's link is there")

// link makes name a relative symlink to guard's copy; it reports whether it
// changed anything.
func link(dir, name string, force bool) (bool, error) {
	p := filepath.Join(dir, name)
	if t, err := os.Readlink(p); err == nil && t == GuardName {
		return false, nil
	} else if err == nil || !errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(p); lerr == nil && !force {
			return false, errNotOurs
		}
	}
	return true, symlinkAtomic(GuardName, p)
}

// symlinkAtomic points path at target through a temporary link and a rename,
// so concurrent repairs never see a half-made link or fail on EEXIST.
func symlinkAtomic(target, path string) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("link %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("link %s: %w", path, err)
	}
	return nil
}

func copyIfChanged(src, dst string, force bool) (bool, error) {
	want, err := os.ReadFile(src)
	if err != nil {
		return false, fmt.Errorf("read guard executable: %w", err)
	}
	if !force {
		if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
			return false, nil
		}
	}
	if err := copyGuard(want, dst); err != nil {
		return false, fmt.Errorf("copy guard: %w", err)
	}
	return true, nil
}

// copyGuard puts guard's executable at dst as a file of its own, 0755:
// state.Replace, never through a symlink there, since the copy exists so
// that no other file can break the shims.
func copyGuard(exe []byte, dst string) error {
	return state.Replace(dst, exe, 0o755)
}

// writeUserFile writes a file the person owns (the manifest, a shell rc
// file), creating its folder: state.WriteAtomic keeps the file's mode and
// owner and writes through a dotfiles manager's symlink.
func writeUserFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return state.WriteAtomic(path, data, mode)
}

// ShellPath is how the shim folder is written in a shell file: under $HOME
// when it is below the home folder, so the block survives a moved home.
func ShellPath(home, shimDir string) string {
	if rel, err := filepath.Rel(home, shimDir); err == nil && !strings.HasPrefix(rel, "..") && home != "" {
		return `$HOME/` + rel
	}
	return shimDir
}

const (
	blockStart = "# >>> guard: shims first in PATH >>>"
	blockEnd   = "# <<< guard <<<"
)

func pathBlock(home, shimDir string) string {
	p := ShellPath(home, shimDir)
	return blockStart + "\n" +
		`case ":$PATH:" in *":` + p + `:"*) ;; *) export PATH="` + p + `:$PATH" ;; esac` + "\n" +
		blockEnd + "\n"
}

// addBlock puts block in the file, replacing an older guard block; it
// reports whether the file changed.
func addBlock(path, block string) (bool, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	rest, _ := cut(string(old))
	if strings.Contains(string(old), block) {
		return false, nil
	}
	if rest != "" && !strings.HasSuffix(rest, "\n") {
		rest += "\n"
	}
	if err := writeUserFile(path, []byte(rest+block), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

func removeBlock(path string) (bool, error) {
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	rest, found := cut(string(old))
	if !found {
		return false, nil
	}
	if err := writeUserFile(path, []byte(rest), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// cut removes every guard block from s.
func cut(s string) (string, bool) {
	found := false
	for {
		i := strings.Index(s, blockStart)
		if i < 0 {
			return s, found
		}
		j := strings.Index(s[i:], blockEnd)
		if j < 0 {
			return s, found
		}
		end := i + j + len(blockEnd)
		if end < len(s) && s[end] == '\n' {
			end++
		}
		s, found = s[:i]+s[end:], true
	}
}
