// Package commands holds the bodies of guard's commands (install, status,
// heal, ask, cache, manifest): each takes the engine and the writers it
// prints to, and reports back an error or a verdict; cmd/guard only parses
// flags and maps the result to an exit status. The engine (package guard)
// never calls back into this package.
package commands

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pelletier/go-toml/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/openclaw"
	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

func installOptions(c *guard.Config) install.Options {
	return install.Options{
		Home:            c.Home,
		ShimDir:         c.ShimDir,
		StateDir:        c.StateDir,
		ConfigDir:       filepath.Dir(manifest.UserPath(c.Home)),
		Self:            c.Self,
		Tools:           sortedKeys(c.M.Tools),
		ManifestPath:    c.ManifestPath,
		DefaultManifest: manifest.InstalledTOML(),
		System:          systemDirs(c),
	}
}

// InstallFlags are `guard install`'s flags.
type InstallFlags struct {
	ShimDir       string // --shim-dir: "" keeps the configured folder
	Source        string // --source: guard's source folder (install.sh passes it)
	ReleaseURL    string // --release-url: the release archive install.sh installed from
	ReleaseSHA256 string // --release-sha256: its sha256
	NoRC          bool
	Force         bool
	BashEnv       bool
	Prewarm       bool
	System        bool
	NoOpenClaw    bool // --no-openclaw: leave OpenClaw's config alone
}

// openclawOptions names OpenClaw's config on this machine, the shim
// folder its exec tool should put first, and guard's record of its edit.
func openclawOptions(c *guard.Config, shimDir string) openclaw.Options {
	return openclaw.Options{
		Config:  openclaw.Find(c.Home, c.Getenv, c.PathEnv),
		ShimDir: shimDir,
		Record:  c.State().OpenClawEdit(),
	}
}

// wireOpenClaw is install's OpenClaw step: a config it will not edit, or
// cannot, is one line and never stops the install.
func wireOpenClaw(c *guard.Config, out io.Writer, shimDir string, skip bool) []string {
	oc := openclawOptions(c, shimDir)
	if skip {
		if err := openclaw.Decline(oc); err != nil {
			fmt.Fprintf(out, "skipped recording --no-openclaw: %v\n", err)
		}
		return nil
	}
	if !oc.Config.Found {
		return nil
	}
	line, err := openclaw.Wire(oc)
	if err != nil {
		fmt.Fprintln(out, "skipped "+openclawError(err))
		return nil
	}
	if line == "" {
		return nil
	}
	fmt.Fprintln(out, line)
	return []string{line}
}

// openclawError is an OpenClaw step's failure in one line, with what the
// person can do when guard will not edit the file.
func openclawError(err error) string {
	var r *openclaw.Refusal
	if errors.As(err, &r) {
		return oneLine(r.Error() + "; " + r.Fix)
	}
	return oneLine("OpenClaw config: " + err.Error())
}

// systemRootVar prefixes the folders --system writes (/usr/local/bin,
// /usr/local/lib/guard, /etc/profile.d), so tests and image builds can aim
// them elsewhere.
const systemRootVar = "GUARD_SYSTEM_ROOT"

// systemLibDir is the shim folder of a --system install: a folder every
// user can read, unlike /root.
const systemLibDir = "/usr/local/lib/guard"

func systemDirs(c *guard.Config) *install.System {
	root := systemRoot(c)
	return &install.System{BinDir: filepath.Join(root, "/usr/local/bin"), ProfileD: filepath.Join(root, "/etc/profile.d")}
}

// systemRoot is GUARD_SYSTEM_ROOT made absolute ("" for the real root): a
// link or a start-up file must not name a folder relative to wherever
// install happened to run.
func systemRoot(c *guard.Config) string {
	root := c.Getenv(systemRootVar)
	if abs, err := filepath.Abs(root); err == nil && root != "" {
		return abs
	}
	return root
}

// Install is `guard install`: it says what it changed and what to run next.
func Install(e *guard.Engine, out io.Writer, f InstallFlags) error {
	c := e.Config()
	o := installOptions(c)
	o.NoRC, o.Force, o.BashEnv, o.Prewarm = f.NoRC, f.Force, f.BashEnv, f.Prewarm
	if !f.System {
		o.System = nil
	} else {
		if systemRoot(c) == "" && os.Geteuid() != 0 {
			return errors.New("install --system writes /usr/local/bin, /usr/local/lib/guard and /etc/profile.d: run it as root")
		}
		o.ShimDir = filepath.Join(systemRoot(c), systemLibDir)
	}
	if f.ShimDir != "" {
		// A relative folder would be a different folder for every caller
		// that reads it back: the PATH entry, the manifest, the marker.
		abs, err := filepath.Abs(f.ShimDir)
		if err != nil {
			return fmt.Errorf("install: --shim-dir %s: %w", f.ShimDir, err)
		}
		o.ShimDir = abs
	}
	if filepath.Clean(o.ShimDir) != filepath.Clean(c.M.ShimDir) {
		o.RecordShimDir = tilde(c.Home, o.ShimDir) // the manifest's spelling: ~/ below home
	}
	// Where install.sh installed guard from: the last --source or
	// --release given wins; a guard install by hand keeps what was recorded.
	switch rec := install.Recorded(c.StateDir); {
	case f.Source != "":
		abs, err := filepath.Abs(f.Source)
		if err != nil {
			return fmt.Errorf("install: --source %s: %w", f.Source, err)
		}
		o.Restore.Source = abs
	case f.ReleaseURL != "":
		if why := manifest.CheckURL(f.ReleaseURL); why != "" {
			return fmt.Errorf("install: --release-url: %s", why)
		}
		if !manifest.IsSHA256(f.ReleaseSHA256) {
			return fmt.Errorf("install: --release-url needs --release-sha256 with the archive's 64-hex-digit sha256, got %q", f.ReleaseSHA256)
		}
		o.Restore.Release = install.Release{URL: f.ReleaseURL, SHA256: strings.ToLower(f.ReleaseSHA256)}
	default:
		o.Restore.Source, o.Restore.Release = rec.Source, rec.Release
	}
	o.Restore.Go, _ = resolve.LookPath("go", c.PathEnv)
	if c.M.Self != nil {
		o.Restore.URLs, o.Restore.SHA256 = c.M.Self.URLs, c.M.Self.SHA256
	} else if r := o.Restore.Release; r.URL != "" {
		o.Restore.URLs, o.Restore.SHA256 = []string{r.URL}, r.SHA256 // [self] in the manifest wins
	}
	if f.Prewarm {
		o.Artifacts = artifacts(e)
	}
	r, err := install.Install(o)
	for _, line := range r.Changes {
		fmt.Fprintln(out, line)
	}
	for _, line := range r.Skipped {
		fmt.Fprintln(out, "skipped "+line)
	}
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	r.Changes = append(r.Changes, wireOpenClaw(c, out, o.ShimDir, f.NoOpenClaw)...)
	removed, err := removeStaleLinks(c)
	for _, name := range removed {
		r.Changes = append(r.Changes, name)
		fmt.Fprintf(out, "removed %s (no tool of that name in the manifest)\n", filepath.Join(c.ShimDir, name))
	}
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if len(r.Changes) == 0 {
		fmt.Fprintf(out, "guard is already installed in %s; nothing changed\n", o.ShimDir)
	}
	fmt.Fprintf(out, "restores itself from: %s\n", restoreSources(o))
	if !sameFileFirst(c.PathEnv, o.ShimDir) {
		fmt.Fprintf(out, "next: put the shims first in this shell's PATH:\n  %s\n", install.ExportPath(o.ShimDir))
	}
	fmt.Fprintf(out, "agent harness that starts commands without a login shell: add to its environment\n  %s", install.EnvPath(o.ShimDir))
	if f.BashEnv {
		fmt.Fprintf(out, " BASH_ENV=%s", install.ShellWord(o.EnvHook()))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "then: guard status")
	return nil
}

// restoreSources says, in one line, what brings guard back at shell start.
func restoreSources(o install.Options) string {
	var from []string
	if o.Restore.Source != "" {
		from = append(from, "a rebuild of "+o.Restore.Source+" (when Go is there)")
	}
	if len(o.Restore.URLs) > 0 {
		from = append(from, strings.Join(o.Restore.URLs, ", ")+" (pinned sha256)")
	}
	if o.NoRC {
		return "what the restore script already says (--no-rc leaves it as it was)"
	}
	if len(from) == 0 {
		return "nothing: install with ./install.sh, or add [self] urls and sha256 to the manifest"
	}
	return strings.Join(from, ", else ")
}

// artifacts are the files prewarm.sh tests at shell start: each tool's
// real binary and each model.
func artifacts(e *guard.Engine) []string {
	c := e.Config()
	var out []string
	for _, name := range sortedKeys(c.M.Tools) {
		t := c.M.Tools[name]
		if h := e.ToolHealth(t); h.Err == nil {
			out = append(out, h.Path)
		} else if t.Path != "" {
			out = append(out, t.Path)
		}
	}
	for _, m := range c.M.Models {
		out = append(out, c.M.ModelsPath(m.File))
	}
	return out
}

// Uninstall is `guard uninstall`.
func Uninstall(c *guard.Config, out io.Writer) error {
	r, err := install.Uninstall(installOptions(c))
	for _, line := range r.Changes {
		fmt.Fprintln(out, line)
	}
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	switch line, err := openclaw.Unwire(openclawOptions(c, c.ShimDir)); {
	case err != nil:
		fmt.Fprintln(out, "skipped "+openclawError(err))
	case line != "":
		fmt.Fprintln(out, line)
		r.Changes = append(r.Changes, line)
	}
	if len(r.Changes) == 0 {
		fmt.Fprintln(out, "guard was not installed; nothing changed")
	}
	fmt.Fprintf(out, "kept: the manifest, models, cache (%s) and heal log (%s)\n", c.StateDir, c.LogPath)
	return nil
}

// HealBackground is `guard heal --background`: it starts the heal detached
// and says where to follow it. prewarm is the PATH block's start: at most
// once per install.PrewarmEvery, silent when it starts nothing.
func HealBackground(e *guard.Engine, names []string, prewarm bool) error {
	c := e.Config()
	b := install.Background{Self: c.Self, Names: names, Env: c.Env, StateDir: c.StateDir}
	if prewarm {
		b.Every = install.PrewarmEvery
		// The hook's list follows the manifest: a tool or model added
		// since the install is tested from the next shell on.
		o := installOptions(c)
		o.Artifacts = artifacts(e)
		if _, err := install.RefreshPrewarm(o); err != nil {
			e.Say("could not refresh the prewarm hook: %v", err)
		}
	}
	pid, err := b.Start()
	if err != nil {
		return fmt.Errorf("heal --background: %w", err)
	}
	if pid != 0 {
		guard.Tell(c.Stderr, fmt.Sprintf("healing in the background at low priority (pid %d); progress: %s; calls that need what it heals wait for it", pid, b.LogPath()))
	}
	return nil
}

// shimDirFirst reports whether the first PATH entry is the shim folder.
func shimDirFirst(c *guard.Config) bool { return sameFileFirst(c.PathEnv, c.ShimDir) }

func sameFileFirst(pathEnv, dir string) bool {
	list := filepath.SplitList(pathEnv)
	return len(list) > 0 && sameFile(list[0], dir)
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return os.SameFile(fa, fb)
}

// ManifestCheck is `guard manifest check [FILE]`: with no FILE it checks the
// manifest guard would use for home: the one named (GUARD_MANIFEST) when
// one is, else the user's file or the embedded default.
func ManifestCheck(out io.Writer, file, named, home string) error {
	m, err := manifest.Load(cmp.Or(file, named), home)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: ok (%s, %s, %s)\n", m.Source, units.Count(len(m.Tools), "tool", "tools"), units.Count(len(m.Models), "model", "models"), units.Count(len(m.Builds), "build", "builds"))
	return nil
}

// LinkTools is the second half of `guard manifest check` when file (""
// for the default) is the manifest in use: the shim folder is mended for
// it at once, so a tool just added gets its link now rather than on the
// next call. It says which links it made.
func LinkTools(e *guard.Engine, out io.Writer, file string) {
	c := e.Config()
	if file != "" && !sameFile(file, c.M.Source) {
		return
	}
	var missing []string
	for _, name := range sortedKeys(c.M.Tools) {
		if shimState(c.ShimDir, name).State == StateMissing {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return
	}
	e.Repair()
	for _, name := range missing {
		if shimState(c.ShimDir, name).State == StateOK {
			fmt.Fprintf(out, "linked %s -> %s\n", tilde(c.Home, filepath.Join(c.ShimDir, name)), install.GuardName)
		}
	}
}

// ManifestShow is `guard manifest show`: the manifest in use as written,
// the user's file (validated again, then printed as is, comments and ~/
// paths kept) or the embedded default's text; with asJSON the effective
// manifest, defaults applied and paths expanded, keyed as in TOML.
func ManifestShow(e *guard.Engine, out io.Writer, asJSON bool) error {
	c := e.Config()
	if asJSON {
		var text bytes.Buffer
		if err := c.M.Encode(&text); err != nil {
			return err
		}
		var doc map[string]any
		if err := toml.Unmarshal(text.Bytes(), &doc); err != nil {
			return fmt.Errorf("manifest show: %w", err)
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	data := manifest.DefaultTOML()
	if c.M.Source != manifest.EmbeddedSource {
		var err error
		if data, err = manifest.ReadFile(c.M.Source); err != nil {
			return fmt.Errorf("read manifest: %w", err)
		}
		if _, err := manifest.Parse(c.M.Source, data, c.Home); err != nil {
			return err // changed since guard read it, and now wrong
		}
	}
	_, err := out.Write(data)
	return err
}

// CacheStatsReport is what `guard cache stats --json` prints: the keys of
// status's cache, and the folder.
type CacheStatsReport struct {
	CacheState
	Folder string `json:"folder"`
}

// CacheStats is `guard cache stats [--json]`.
func CacheStats(e *guard.Engine, out io.Writer, asJSON bool) error {
	store := e.PromptCache()
	st, err := store.Stats()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return cacheError("read", store.Dir, err)
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(CacheStatsReport{CacheState{st.Entries, st.Bytes, st.Hits, st.Misses, st.SavedSeconds}, store.Dir})
	}
	fmt.Fprintf(out, "entries  %d\nbytes    %d\nhits     %d\nmisses   %d\nsaved    %.1fs\nfolder   %s\n",
		st.Entries, st.Bytes, st.Hits, st.Misses, st.SavedSeconds, store.Dir)
	return nil
}

// CacheClear is `guard cache clear`.
func CacheClear(e *guard.Engine, out io.Writer) error {
	store := e.PromptCache()
	st, _ := store.Stats()
	if err := store.Clear(); err != nil {
		return cacheError("clear", store.Dir, err)
	}
	fmt.Fprintf(out, "removed %s (%s)\n", units.Count(st.Entries, "cached answer", "cached answers"), units.Bytes(st.Bytes))
	return nil
}

// cacheError says in a sentence why the prompt cache in dir could not be
// read or cleared, and what to do; an error it has no words for is kept.
func cacheError(verb, dir string, err error) error {
	switch {
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("cannot %s the prompt cache in %s: it is read-only or not yours; set GUARD_STATE_DIR to a folder of your own", verb, dir)
	}
	return fmt.Errorf("cannot %s the prompt cache in %s: %w", verb, dir, err)
}
