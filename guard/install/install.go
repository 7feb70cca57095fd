// Package install puts guard in the shim folder and takes it out again:
// a copy of the guard executable (so a deleted build folder cannot break the
// shims), one hard link to it per manifest tool (links.go), the default manifest when
// the user has none, a marked PATH block in the shell start-up files, the
// hook files the block calls on (restore.sh, which brings back a guard the
// sandbox evicted; env.sh for BASH_ENV; prewarm.sh), and with --system links
// in a folder on every default PATH. Every step checks before it writes, so
// running install twice changes nothing. Repair is the cheap pass every
// guard call makes to bring back links a sandbox evicted.
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
	"github.com/sandbox-guard/guard/manifest"
)

// GuardName is the name of guard's own copy in the shim folder.
const GuardName = "guard"

// CopyStamp is the empty file beside guard's copy whose modification time
// is the copy's: the PATH block compares the two with the shell's own
// test (`[ A -nt B ]`, no program started), so a copy an eviction cut off
// or replaced (a new mtime) sends the shell to restore.sh, which runs the
// copy to check it.
const CopyStamp = ".guard.stamp"

// Options says where things go. Nothing here reads the environment.
type Options struct {
	Home            string
	ShimDir         string
	StateDir        string
	ConfigDir       string   // the hook files (restore.sh, env.sh, prewarm.sh): the manifest's folder
	Self            string   // guard's own executable (os.Executable)
	Tools           []string // names to link to guard
	ManifestPath    string   // where the user manifest lives
	DefaultManifest []byte
	NoRC            bool // leave the start-up files and the hook files alone
	Force           bool // replace files in the shim folder that are not guard's links

	// RecordShimDir, when set, is written as the manifest's shim_dir (the
	// manifest's own spelling, "~/x" or absolute), so every later call,
	// status and uninstall use the folder this install put guard in.
	RecordShimDir string
	Restore       Restore  // where the restore script brings guard back from
	BashEnv       bool     // write env.sh and export BASH_ENV from the login blocks
	Prewarm       bool     // write prewarm.sh and source it from the blocks
	Artifacts     []string // what prewarm.sh tests: tool binaries and models
	System        *System  // --system; for Uninstall, where to look for what it added
}

// System is where `guard install --system` puts its links and its
// start-up file. The shim folder (Options.ShimDir) is then a system folder
// every user can read, such as /usr/local/lib/guard.
type System struct {
	BinDir   string // a folder ahead of the real tools on the default PATH: /usr/local/bin
	ProfileD string // /etc/profile.d, read by every login sh and bash
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

func (o Options) hooks() hooks {
	if o.ConfigDir == "" {
		return hooks{dir: filepath.Join(o.Home, ".config", "guard")}
	}
	return hooks{dir: o.ConfigDir}
}

// EnvHook is the file --bash-env writes, for BASH_ENV.
func (o Options) EnvHook() string { return o.hooks().env() }

// userBlock is the block for the person's own start-up files: paths under
// $HOME where they can be.
func (o Options) userBlock() blockSpec {
	w := func(p string) string { return shellWord(o.Home, p) }
	guard := filepath.Join(o.ShimDir, GuardName)
	b := blockSpec{
		shimDir: w(o.ShimDir), guard: w(guard), stamp: w(filepath.Join(o.ShimDir, CopyStamp)), links: w(filepath.Join(o.ShimDir, LinksStamp)),
		restore: w(o.hooks().restore()), off: offLine(guard, o.Restore),
	}
	if o.BashEnv {
		b.bashEnv = w(o.hooks().env())
	}
	if o.Prewarm {
		b.prewarm = w(o.hooks().prewarm())
	}
	return b
}

// Install does every step; it stops at the first error, having said what it
// had done by then in the report.
func Install(o Options) (*Report, error) {
	r := &Report{}
	if err := os.MkdirAll(o.ShimDir, 0o755); err != nil {
		return r, fmt.Errorf("create shim folder: %w", err)
	}
	before := statCopy(o.ShimDir)
	copied, err := copyIfChanged(o.Self, filepath.Join(o.ShimDir, GuardName), o.Force)
	if err != nil {
		return r, err
	}
	// Every tool name is a hard link to the copy: a new copy leaves the
	// old file under each name, so each is linked again now.
	g := statCopy(o.ShimDir)
	if copied {
		g = g.replacing(before)
	}
	exe := copyBytes(o.ShimDir)
	if copied {
		r.did("copied guard to %s", filepath.Join(o.ShimDir, GuardName))
	} else if err := stampCopy(filepath.Join(o.ShimDir, GuardName)); err != nil {
		return r, err // a copy made by an older install may lack its stamp
	}
	_ = os.Remove(restoreFailed(o.StateDir))
	for _, name := range o.Tools {
		changed, err := link(g, o.ShimDir, name, o.Force, exe)
		switch {
		case errors.Is(err, errNotOurs):
			r.skip("%s: %v (use --force to replace it)", filepath.Join(o.ShimDir, name), err)
		case err != nil:
			return r, err
		case changed:
			r.did("linked %s -> %s", filepath.Join(o.ShimDir, name), GuardName)
		}
	}
	if mtime, ok := linksCheckStart(o.ShimDir); ok {
		stampLinks(o.ShimDir, mtime) // install has just made every link
	}
	if err := manifestSteps(o, r); err != nil {
		return r, err
	}
	if !o.NoRC {
		if err := shellSteps(o, r); err != nil {
			return r, err
		}
	}
	if o.System != nil {
		if err := installSystem(o, r); err != nil {
			return r, err
		}
	}
	marker := state.Layout{Dir: o.StateDir}.Installed()
	text := o.ShimDir + "\n"
	if o.Restore.Source != "" {
		text += sourcePrefix + o.Restore.Source + "\n"
	}
	if r := o.Restore.Release; r.URL != "" {
		text += releasePrefix + r.SHA256 + " " + r.URL + "\n"
	}
	if b, _ := readMarker(o.StateDir); string(b) != text {
		if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
			return r, fmt.Errorf("record install: %w", err)
		}
		if err := state.Replace(marker, []byte(text), 0o600); err != nil {
			return r, fmt.Errorf("record install: %w", err)
		}
	}
	return r, nil
}

// sourcePrefix starts the install marker's line that names guard's source
// folder, releasePrefix the one that names the release archive (its
// sha256, then its URL); the first line is the shim folder.
const (
	sourcePrefix  = "source "
	releasePrefix = "release "
)

// Marker is what the install marker records: the shim folder the last
// install used, and where install.sh installed guard from, so that a later
// `guard install` without --source or --release keeps restoring from there.
type Marker struct {
	ShimDir string
	Source  string
	Release Release
}

// Recorded reads the install marker; a missing or unreadable one is a
// zero Marker.
func Recorded(stateDir string) Marker {
	b, err := readMarker(stateDir)
	if err != nil {
		return Marker{}
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	m := Marker{ShimDir: lines[0]}
	for _, l := range lines[1:] {
		if v, ok := strings.CutPrefix(l, sourcePrefix); ok {
			m.Source = v
		}
		if v, ok := strings.CutPrefix(l, releasePrefix); ok {
			m.Release.SHA256, m.Release.URL, _ = strings.Cut(v, " ")
		}
	}
	return m
}

// readMarker reads the install marker, guard's own file: a link or FIFO in
// its place is no marker (install replaces it), never followed or waited
// on, since a call reads it when the shim folder is gone.
func readMarker(stateDir string) ([]byte, error) {
	return state.ReadRegular(state.Layout{Dir: stateDir}.Installed(), maxMarker, true)
}

// maxMarker bounds what is read of the install marker: two paths.
const maxMarker = 64 << 10

// manifestSteps writes the default manifest when there is none and
// records the shim folder in it when this install chose another one.
func manifestSteps(o Options, r *Report) error {
	if o.ManifestPath == "" {
		return nil
	}
	if _, err := os.Stat(o.ManifestPath); errors.Is(err, fs.ErrNotExist) {
		if err := writeUserFile(o.ManifestPath, o.DefaultManifest, 0o644); err != nil {
			return fmt.Errorf("write default manifest: %w", err)
		}
		r.did("wrote the default manifest to %s", o.ManifestPath)
	}
	if o.RecordShimDir == "" {
		return nil
	}
	// Not recording it is no reason to stop: the shims work, and the
	// person is told what to set instead.
	data, err := manifest.ReadFile(o.ManifestPath)
	if err == nil {
		data, err = manifest.SetShimDir(data, o.RecordShimDir)
	}
	if err == nil {
		err = state.WriteAtomic(o.ManifestPath, data, 0o644)
	}
	if err != nil {
		r.skip("recording shim_dir in %s: %v; set GUARD_SHIM_DIR=%s where guard runs", o.ManifestPath, err, o.ShimDir)
		return nil
	}
	r.did("recorded shim_dir = %q in %s", o.RecordShimDir, o.ManifestPath)
	return nil
}

// shellSteps writes the hook files and puts the PATH block in every
// start-up file that needs one.
func shellSteps(o Options, r *Report) error {
	h := o.hooks()
	b := o.userBlock()
	texts := map[string]string{h.restore(): restoreScript(o.ShimDir, o.StateDir, o.Restore)}
	if o.BashEnv {
		texts[h.env()] = envHook(b)
	}
	if o.Prewarm {
		texts[h.prewarm()] = prewarmHook(b.guard, o.Artifacts)
	}
	for _, p := range h.all() {
		text, ok := texts[p]
		if !ok {
			continue
		}
		changed, err := writeHook(p, text)
		if err != nil {
			return err
		}
		if changed {
			r.did("wrote %s", p)
		}
	}
	for _, rc := range rcFiles {
		p := filepath.Join(o.Home, rc.name)
		if _, err := os.Lstat(p); err != nil && rc.onlyIfThere {
			continue
		}
		changed, err := placeBlock(p, b.block(), rc.where)
		if err != nil {
			return err
		}
		if changed {
			r.did("added the PATH block to %s", p)
		}
	}
	return nil
}

// RefreshPrewarm rewrites prewarm.sh with o.Artifacts when the hook is
// installed; it reports whether the file changed.
func RefreshPrewarm(o Options) (bool, error) {
	p := o.hooks().prewarm()
	if _, err := os.Stat(p); err != nil {
		return false, nil
	}
	return writeHook(p, prewarmHook(o.userBlock().guard, o.Artifacts))
}

// Uninstall removes exactly what Install added: guard's links, its copy,
// the PATH blocks, the hook files, what --system added and the install
// marker. Models, cache, log and manifest stay.
func Uninstall(o Options) (*Report, error) {
	r := &Report{}
	entries, err := os.ReadDir(o.ShimDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("read shim folder: %w", err)
	}
	g := statCopy(o.ShimDir)
	for _, e := range entries {
		p := filepath.Join(o.ShimDir, e.Name())
		if k := g.classify(o.ShimDir, e.Name()); e.Name() != GuardName && (k == Linked || k == Outdated) {
			if err := os.Remove(p); err != nil {
				return r, fmt.Errorf("remove link: %w", err)
			}
			r.did("removed %s", p)
		}
	}
	if err := os.Remove(filepath.Join(o.ShimDir, GuardName)); err == nil {
		r.did("removed %s", filepath.Join(o.ShimDir, GuardName))
	}
	_ = os.Remove(filepath.Join(o.ShimDir, CopyStamp))
	_ = os.Remove(filepath.Join(o.ShimDir, LinksStamp))
	if os.Remove(o.ShimDir) == nil { // only when empty
		r.did("removed %s", o.ShimDir)
	}
	if o.System != nil {
		if err := uninstallSystem(o, r); err != nil {
			return r, err
		}
	}
	for _, rc := range rcFiles {
		p := filepath.Join(o.Home, rc.name)
		done, err := removeBlock(p)
		if err != nil {
			return r, err
		}
		switch done {
		case removedBlock:
			r.did("removed the PATH block from %s", p)
		case removedFile:
			r.did("removed %s, which guard install had created (nothing else was in it)", p)
		}
	}
	for _, p := range o.hooks().all() {
		if removeHook(p) {
			r.did("removed %s", p)
		}
	}
	_ = os.Remove(state.Layout{Dir: o.StateDir}.Installed())
	return r, nil
}

var errNotOurs = errors.New("a file that is not guard's link is there")

// link makes name guard's (see linkTool) unless it already is; a file or
// link that is not guard's stays without force. It reports whether it
// changed anything.
func link(g guardFile, dir, name string, force bool, exe func() ([]byte, error)) (bool, error) {
	switch g.classify(dir, name) {
	case Linked:
		return false, nil
	case Foreign:
		if !force {
			return false, errNotOurs
		}
	}
	return true, linkTool(dir, name, exe)
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
		// A link, a copy that lost its mode, or one someone else owns (in
		// a folder others can write) is replaced even when the bytes it
		// reaches are the same.
		fi, err := os.Lstat(dst)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == 0o755 && state.Owned(fi) {
			if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
				return false, nil
			}
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
	if err := state.Replace(dst, exe, 0o755); err != nil {
		return err
	}
	return stampCopy(dst)
}

// stampCopy gives CopyStamp, beside the copy at dst, the copy's mtime.
func stampCopy(dst string) error {
	fi, err := os.Lstat(dst)
	if err != nil {
		return fmt.Errorf("stamp guard's copy: %w", err)
	}
	stamp := filepath.Join(filepath.Dir(dst), CopyStamp)
	if sf, err := os.Lstat(stamp); err != nil || !sf.Mode().IsRegular() || !sf.ModTime().Equal(fi.ModTime()) {
		if err := state.Replace(stamp, nil, 0o644); err != nil {
			return fmt.Errorf("stamp guard's copy: %w", err)
		}
		if err := os.Chtimes(stamp, fi.ModTime(), fi.ModTime()); err != nil {
			return fmt.Errorf("stamp guard's copy: %w", err)
		}
	}
	return nil
}

// maxUserFile bounds what install reads of a file the person owns: a
// shell rc file, a hook, the manifest is far smaller.
const maxUserFile = 4 << 20

// readUserFile reads a file the person owns (a shell rc file, a hook file,
// the manifest), following a dotfiles manager's symlink, but never a FIFO
// or a device (~/.bashrc -> /dev/zero): those would block the read or never
// end it (state.ReadRegular).
func readUserFile(path string) ([]byte, error) {
	return state.ReadRegular(path, maxUserFile, false)
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
