// Package state is where guard keeps its own files and how it writes them.
//
// Every guard process finds its state through the same folder
// ($GUARD_STATE_DIR, ~/.cache/guard by default) and names the same files in
// it; Layout spells each name once, so two packages cannot drift apart on
// where the locks or stamps are. The writers here are the one way guard
// replaces a file (Replace for its own files, WriteAtomic for a person's),
// PathKey the one way it names a file after another path, and OpenLog the
// one way it appends to a log it rotates.
//
// It imports the standard library only, so the manifest package, which must
// stay free of guard's runtime, can use it too.
package state

import "path/filepath"

// Layout names the files below one state folder.
type Layout struct {
	Dir string // the state folder
}

// Stamps holds the hash stamps of model files and the health stamps of
// binaries: what lets a healthy call skip a hash or an ELF walk.
func (l Layout) Stamps() string { return filepath.Join(l.Dir, "stamps") }

// Lock is the heal lock named name: locks/name.lock.
func (l Layout) Lock(name string) string { return filepath.Join(l.Dir, "locks", name+".lock") }

// Prompts holds the prompt cache.
func (l Layout) Prompts() string { return filepath.Join(l.Dir, "prompts") }

// Failures holds the remembered failed heals, each kept until its back-off
// ends.
func (l Layout) Failures() string { return filepath.Join(l.Dir, "failures") }

// Builds holds the build logs and the markers of builds in progress.
func (l Layout) Builds() string { return filepath.Join(l.Dir, "builds") }

// Stash holds what good builds made (package stash): an index and one
// zstd entry per build, restored before a rebuild.
func (l Layout) Stash() string { return filepath.Join(l.Dir, "stash") }

// Installed is the marker guard install writes (its first line is the shim
// folder, then the source folder it was built from), so a call can rebuild
// a shim folder a sandbox evicted whole.
func (l Layout) Installed() string { return filepath.Join(l.Dir, "installed") }

// HealLog is the per-user heal log, used when the shared default
// (/tmp/selfheal.log) belongs to another user.
func (l Layout) HealLog() string { return filepath.Join(l.Dir, "selfheal.log") }

// Speeds holds the speeds each model generated at on this machine, from
// which llama budgets are learned.
func (l Layout) Speeds() string { return filepath.Join(l.Dir, "speeds.json") }

// DecodedManifest is the manifest decoded once and kept as an index of
// JSON entries, so a shim call decodes no TOML and reads only the entries
// it needs.
func (l Layout) DecodedManifest() string { return filepath.Join(l.Dir, "manifest.decoded") }

// RestoreLog holds what the last restore of guard's copy at shell start
// printed (restore.sh): the shell itself gets one line naming this file.
func (l Layout) RestoreLog() string { return filepath.Join(l.Dir, "restore.log") }

// ShimsStamp records the shim folder as the last full check of its links
// left it, so a call checks every link only when something changed.
func (l Layout) ShimsStamp() string { return filepath.Join(l.Dir, "shims.stamp") }

// Jobs holds one record per heal a call started detached (NAME.json: what
// heals, its pid, start, percent, time left, phase, and at the end its
// result), the lock its heal holds for its whole life (NAME.lock: held
// means alive, whatever the pid says) and its stderr (NAME.log).
func (l Layout) Jobs() string { return filepath.Join(l.Dir, "jobs") }

// OpenClawEdit records the edit guard install made to OpenClaw's config
// (package openclaw), so that uninstall undoes exactly it.
func (l Layout) OpenClawEdit() string { return filepath.Join(l.Dir, "openclaw-edit.json") }
