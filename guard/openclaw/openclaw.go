// Package openclaw wires guard into OpenClaw's exec tool, the shell an
// OpenClaw agent runs its commands in. That tool starts `$SHELL
// --noprofile --norc -c CMD` with BASH_ENV and ENV removed and a PATH it
// took once from a login shell when the gateway started, so neither the
// start-up files' PATH block nor BASH_ENV reaches a command after a
// mid-session install. The one setting that does is OpenClaw's own
// tools.exec.pathPrepend, read afresh for every command: guard install
// puts the absolute shim folder first in it, uninstall takes exactly that
// entry out again, and status says whether it is there
// (docs/shells.md, "OpenClaw").
//
// The config is the person's file, in JSON5, often holding their tokens.
// guard edits it as text: one insertion, so every other byte (comments,
// quotes, order) stays as written, and uninstall, finding the file as
// install left it, removes exactly those bytes and leaves the file
// byte-identical to before. It never writes a config that is a symlink or
// belongs to another user, nor one it cannot parse; those are reported in
// one line and left alone.
package openclaw

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/guard/state"
)

// Config is where OpenClaw keeps its settings on this machine.
type Config struct {
	Path string // the config file OpenClaw reads (it may not exist yet)
	// Found says OpenClaw is on this machine: its config file or its
	// folder is there, or `openclaw` is on PATH. How says which.
	Found bool
	How   string
}

// Find resolves OpenClaw's config file as OpenClaw 2026.9 does:
// $OPENCLAW_CONFIG_PATH; else the first that exists of openclaw.json (or
// the older clawdbot.json) in $OPENCLAW_STATE_DIR, ~/.openclaw and
// ~/.clawdbot; else openclaw.json in the state folder. ~ is
// $OPENCLAW_HOME when set, else home. getenv reads the environment;
// pathEnv is the PATH `openclaw` is looked for in.
func Find(home string, getenv func(string) string, pathEnv string) Config {
	env := func(k string) string {
		v := strings.TrimSpace(getenv(k))
		if v == "undefined" || v == "null" {
			return ""
		}
		return v
	}
	if h := env("OPENCLAW_HOME"); h != "" {
		home = expand(h, home)
	}
	c := Config{}
	stateDir := env("OPENCLAW_STATE_DIR")
	if stateDir != "" {
		stateDir = expand(stateDir, home)
	}
	if p := env("OPENCLAW_CONFIG_PATH"); p != "" {
		c.Path = expand(p, home)
	} else {
		var dirs []string
		if stateDir != "" {
			dirs = append(dirs, stateDir)
		}
		dirs = append(dirs, filepath.Join(home, ".openclaw"), filepath.Join(home, ".clawdbot"))
	search:
		for _, d := range dirs {
			for _, name := range []string{"openclaw.json", "clawdbot.json"} {
				if _, err := os.Stat(filepath.Join(d, name)); err == nil {
					c.Path = filepath.Join(d, name)
					break search
				}
			}
		}
		if c.Path == "" {
			d := stateDir
			if d == "" {
				d = filepath.Join(home, ".openclaw")
				if !exists(d) && exists(filepath.Join(home, ".clawdbot")) {
					d = filepath.Join(home, ".clawdbot")
				}
			}
			c.Path = filepath.Join(d, "openclaw.json")
		}
	}
	switch {
	case exists(c.Path):
		c.Found, c.How = true, "its config "+c.Path
	case exists(filepath.Dir(c.Path)):
		c.Found, c.How = true, "its folder "+filepath.Dir(c.Path)
	default:
		if p, ok := resolve.LookPath("openclaw", pathEnv); ok {
			c.Found, c.How = true, p
		}
	}
	return c
}

// expand makes p absolute as OpenClaw does: a leading ~ is home, and a
// relative path is taken from the current folder.
func expand(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// Options name the config, the folder to put first, and guard's record of
// its edit.
type Options struct {
	Config  Config
	ShimDir string // absolute: what every OpenClaw version reads the same (2026.9.6 expands a leading ~, not every version did)
	// Record is guard's own file (in its state folder) that remembers
	// the edit install made, so that uninstall can undo exactly it.
	Record string

	// beforeRename, when set, runs right before each rename of an edit
	// (a test's writer renames its own version in there).
	beforeRename func()
}

// Refusal is a config guard will not edit: a symlink, another user's
// file or folder, not a regular file, one it cannot parse, or one where
// the setting has the wrong shape. Install and uninstall go on without
// it, saying so in one line.
type Refusal struct {
	Path   string
	Reason string
	Fix    string // what the person can do instead
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("OpenClaw config %s left untouched: %s", r.Path, r.Reason)
}

// record is what install remembers of its edit: the file, the folder it
// added, where it inserted which bytes, and the sha256 of the file as it
// left it. A file or folder install created is noted so that uninstall
// removes it when nothing else was added since.
type record struct {
	Config      string `json:"config"`
	ShimDir     string `json:"shim_dir"`
	At          int    `json:"at"`
	Inserted    string `json:"inserted"`
	After       string `json:"after_sha256"`
	CreatedFile bool   `json:"created_file,omitempty"`
	CreatedDir  bool   `json:"created_dir,omitempty"`
	// Declined is install --no-openclaw: status then reports OpenClaw as
	// left alone on purpose, not as a problem.
	Declined bool `json:"declined,omitempty"`
}

// maxConfig bounds what is read of a config: OpenClaw's are kilobytes.
const maxConfig = 4 << 20

// Wire puts o.ShimDir first in tools.exec.pathPrepend of o.Config.Path,
// creating the file (0600, in a 0700 folder, as OpenClaw does) when
// OpenClaw is here without one. It returns the line to print, empty when
// nothing changed. A *Refusal means the file was left as it was.
func Wire(o Options) (string, error) {
	for range editAttempts {
		line, err := wire(o)
		if !errors.Is(err, errChanged) {
			return line, err
		}
	}
	return "", changedRefusal(o.Config.Path, "guard install")
}

// editAttempts is how many times an edit is made afresh when the config
// changed between guard's read and its rename.
const editAttempts = 3

// errChanged is an edit not written: the config changed after it was read.
var errChanged = errors.New("the config changed while guard edited it")

// changedRefusal is an edit given up after editAttempts: the config
// changed each time.
func changedRefusal(path, again string) *Refusal {
	return &Refusal{path, fmt.Sprintf("it changed each of %d times guard was about to write it (OpenClaw or another program is rewriting it)", editAttempts),
		"run " + again + " again once it is quiet"}
}

// writeOver replaces path with out only while it still holds was (absent:
// while there is no file). OpenClaw rewrites its config by renaming a new
// file over it; one that lands between guard's read and its rename would
// otherwise be lost. What is left is the time between this last read and
// the rename itself, a few microseconds.
func (o Options) writeOver(path string, was []byte, absent bool, out []byte) error {
	return state.WriteAtomicIf(path, out, 0o600, func() error {
		if o.beforeRename != nil {
			o.beforeRename()
		}
		now, err := readConfig(path)
		if absent && errors.Is(err, fs.ErrNotExist) || !absent && err == nil && bytes.Equal(now, was) {
			return nil
		}
		return errChanged
	})
}

// wire is one attempt of Wire: errChanged when the config changed between
// its read and its rename.
func wire(o Options) (string, error) {
	path := o.Config.Path
	if rec, ok := readRecord(o.Record); ok && !rec.Declined && (rec.ShimDir != o.ShimDir || rec.Config != path) {
		// An earlier install put another folder, or edited another file:
		// take that entry out first.
		if _, err := Unwire(o); err != nil {
			return "", err
		}
	}
	dir := filepath.Dir(path)
	createdDir := false
	if !exists(dir) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("create %s: %w", dir, err)
		}
		createdDir = true
	}
	text, err := readConfig(path)
	if errors.Is(err, fs.ErrNotExist) {
		text := []byte("{\n  " + jsonString("tools") + ": {\n    " + jsonString("exec") + ": {\n      " +
			jsonString("pathPrepend") + ": [\n        " + jsonString(o.ShimDir) + "\n      ]\n    }\n  }\n}\n")
		if err := checkFolder(path); err != nil {
			return "", err
		}
		if err := o.writeOver(path, nil, true, text); err != nil {
			return "", err
		}
		rec := record{Config: path, ShimDir: o.ShimDir, Inserted: string(text), After: sum(text), CreatedFile: true, CreatedDir: createdDir}
		return fmt.Sprintf("wrote %s: OpenClaw's exec puts %s first in PATH (%s)", path, o.ShimDir, Setting), writeRecord(o.Record, rec)
	}
	if err != nil {
		return "", err
	}
	root, err := parse(text)
	if err != nil {
		return "", &Refusal{path, "OpenClaw cannot parse it either (" + err.Error() + ")", "fix the file (openclaw config validate), then guard install"}
	}
	ins, err := addEntry(text, root, o.ShimDir)
	if err != nil {
		return "", &Refusal{path, err.Error(), handFix(path, o.ShimDir)}
	}
	if ins.text == "" {
		return "", nil // already there, from an earlier install or by hand
	}
	out := append(append(append([]byte{}, text[:ins.at]...), ins.text...), text[ins.at:]...)
	if err := checkEdit(out, o.ShimDir, true); err != nil {
		return "", err
	}
	if err := o.writeOver(path, text, false, out); err != nil {
		return "", err
	}
	rec := record{Config: path, ShimDir: o.ShimDir, At: ins.at, Inserted: ins.text, After: sum(out), CreatedDir: createdDir}
	return fmt.Sprintf("added %s to %s in %s: OpenClaw's exec puts it first in PATH", o.ShimDir, Setting, path), writeRecord(o.Record, rec)
}

// Decline records install --no-openclaw, unless install already wired
// OpenClaw: then that edit stays recorded for uninstall.
func Decline(o Options) error {
	if rec, ok := readRecord(o.Record); ok && !rec.Declined {
		return nil
	}
	return writeRecord(o.Record, record{Config: o.Config.Path, ShimDir: o.ShimDir, Declined: true})
}

// Unwire takes out what Wire added. When the file is as install left it,
// the inserted bytes come out and the file is byte-identical to what it
// was before (a file install created is removed, and its folder when
// install created that too and it is empty). When it changed since, the
// entry o.ShimDir alone is removed from tools.exec.pathPrepend. Without a
// record of guard's edit (the folder was there before install, added by
// hand, or install was declined) nothing is removed: only what guard added
// goes.
func Unwire(o Options) (string, error) {
	for range editAttempts {
		line, err := unwire(o)
		if !errors.Is(err, errChanged) {
			return line, err
		}
	}
	return "", changedRefusal(o.Config.Path, "guard uninstall")
}

// unwire is one attempt of Unwire: errChanged when the config changed
// between its read and its rename.
func unwire(o Options) (string, error) {
	rec, haveRec := readRecord(o.Record)
	path, shimDir := o.Config.Path, o.ShimDir
	if haveRec && !rec.Declined {
		path, shimDir = rec.Config, rec.ShimDir
	}
	text, err := readConfig(path)
	var refused *Refusal
	if errors.As(err, &refused) && (!haveRec || rec.Declined) {
		return "", removeRecord(o.Record) // guard never edited it: nothing to undo
	}
	if errors.Is(err, fs.ErrNotExist) {
		if haveRec && rec.CreatedDir {
			_ = os.Remove(filepath.Dir(path)) // only when empty
		}
		return "", removeRecord(o.Record)
	}
	if err != nil {
		return "", err
	}
	if haveRec && !rec.Declined && sum(text) == rec.After {
		if rec.CreatedFile {
			if err := os.Remove(path); err != nil {
				return "", err
			}
			if rec.CreatedDir {
				_ = os.Remove(filepath.Dir(path))
			}
			return "removed " + path + ", which guard install had created", removeRecord(o.Record)
		}
		end := rec.At + len(rec.Inserted)
		if rec.At >= 0 && end <= len(text) && string(text[rec.At:end]) == rec.Inserted {
			out := append(append([]byte{}, text[:rec.At]...), text[end:]...)
			if err := checkEdit(out, shimDir, false); err == nil {
				if err := o.writeOver(path, text, false, out); err != nil {
					return "", err
				}
				return fmt.Sprintf("removed %s from %s in %s", shimDir, Setting, path), removeRecord(o.Record)
			}
		}
	}
	if !haveRec || rec.Declined {
		// guard added nothing: an entry there is the person's own.
		return "", removeRecord(o.Record)
	}
	// Changed since install: take out the entry alone.
	root, err := parse(text)
	if err != nil {
		return "", &Refusal{path, "it cannot be parsed (" + err.Error() + ")", "remove " + shimDir + " from " + Setting + " by hand"}
	}
	out, found, err := removeEntry(text, root, shimDir)
	if err != nil || !found {
		return "", removeRecord(o.Record)
	}
	if err := checkEdit(out, shimDir, false); err != nil {
		return "", err
	}
	if err := o.writeOver(path, text, false, out); err != nil {
		return "", err
	}
	return fmt.Sprintf("removed %s from %s in %s (the file changed since guard install: the rest stays as it is now)", shimDir, Setting, path), removeRecord(o.Record)
}

// Status is whether OpenClaw's exec finds the shims first.
type Status struct {
	Found     bool     `json:"found"`
	Config    string   `json:"config,omitempty"`
	Protected bool     `json:"protected"`
	Entries   []string `json:"path_prepend,omitempty"`
	Declined  bool     `json:"declined,omitempty"` // install --no-openclaw
	Reason    string   `json:"reason,omitempty"`
	Fix       string   `json:"fix,omitempty"`
}

// Check reads the config, writing nothing.
func Check(o Options) Status {
	st := Status{Found: o.Config.Found, Config: o.Config.Path}
	if !st.Found {
		return st
	}
	rec, ok := readRecord(o.Record)
	st.Declined = ok && rec.Declined
	text, err := readConfig(o.Config.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st.Reason, st.Fix = "no config file, so no "+Setting, "guard install"
		return st
	case err != nil:
		st.Reason, st.Fix = err.Error(), "guard install"
		var r *Refusal
		if errors.As(err, &r) {
			st.Reason, st.Fix = r.Reason, r.Fix
		}
		return st
	}
	root, err := parse(text)
	if err != nil {
		st.Reason, st.Fix = "cannot parse it: "+err.Error(), "fix the file (openclaw config validate), then guard install"
		return st
	}
	st.Entries, err = entries(root)
	if err != nil {
		st.Reason, st.Fix = err.Error(), handFix(o.Config.Path, o.ShimDir)
		return st
	}
	for _, e := range st.Entries {
		if e == o.ShimDir {
			st.Protected = true
			return st
		}
	}
	st.Reason, st.Fix = Setting+" does not hold "+o.ShimDir, "guard install"
	return st
}

func handFix(path, shimDir string) string {
	return "add " + jsonString(shimDir) + " first to " + Setting + " in " + path + " by hand"
}

// readConfig reads the config for an edit: never through a symlink, never
// another user's file or a file in another user's folder (a *Refusal), at
// most maxConfig bytes.
func readConfig(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return nil, &Refusal{path, "it is a symlink (to " + target + "); guard edits no file through a link",
			"point OPENCLAW_CONFIG_PATH at the real file, then guard install"}
	}
	if err := checkFolder(path); err != nil {
		return nil, err
	}
	f, fi, err := state.OpenRegularStat(path, true)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return nil, &Refusal{path, "it is a symlink; guard edits no file through a link", "point OPENCLAW_CONFIG_PATH at the real file, then guard install"}
	case errors.Is(err, state.ErrNotRegular):
		return nil, &Refusal{path, "it is not a regular file", "make it one, then guard install"}
	case err != nil:
		return nil, err
	}
	defer f.Close()
	if !state.Owned(fi) {
		return nil, &Refusal{path, fmt.Sprintf("it belongs to another user (uid %d)", owner(fi)), "run guard install as that user"}
	}
	text, err := io.ReadAll(io.LimitReader(f, maxConfig+1))
	if err != nil {
		return nil, err
	}
	if len(text) > maxConfig {
		return nil, &Refusal{path, fmt.Sprintf("it is over %d bytes, far more than a config holds", maxConfig), "check the file"}
	}
	return text, nil
}

// checkFolder refuses a config whose folder belongs to another user: a
// file guard renames into place there could be swapped by that user.
func checkFolder(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !state.Owned(fi) {
		return &Refusal{path, fmt.Sprintf("its folder %s belongs to another user (uid %d)", dir, owner(fi)), "run guard install as that user"}
	}
	return nil
}

func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// checkEdit parses the text an edit made and checks the setting holds
// shimDir (want) or no longer does: an edit that would leave a config
// OpenClaw cannot read is never written.
func checkEdit(text []byte, shimDir string, want bool) error {
	root, err := parse(text)
	if err != nil {
		return fmt.Errorf("the edited config would not parse (%v); nothing written", err)
	}
	list, err := entries(root)
	if err != nil {
		return fmt.Errorf("the edited config: %v; nothing written", err)
	}
	has := false
	for _, e := range list {
		has = has || e == shimDir
	}
	if has != want {
		return fmt.Errorf("the edited config's %s is %q; nothing written", Setting, list)
	}
	return nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func readRecord(path string) (record, bool) {
	var r record
	b, err := state.ReadRegular(path, maxConfig, true)
	if err != nil || json.Unmarshal(b, &r) != nil {
		return record{}, false
	}
	return r, true
}

func writeRecord(path string, r record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("record the OpenClaw edit: %w", err)
	}
	if err := state.Replace(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("record the OpenClaw edit: %w", err)
	}
	return nil
}

func removeRecord(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
