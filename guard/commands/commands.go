// Package commands holds the bodies of guard's commands (install, status,
// heal, ask, cache, manifest): each takes the engine and the writers it
// prints to, and reports back an error or a verdict; cmd/guard only parses
// flags and maps the result to an exit status. The engine (package guard)
// never calls back into this package.
package commands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/BurntSushi/toml"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/manifest"
)

func installOptions(c *guard.Config) install.Options {
	return install.Options{
		Home:            c.Home,
		ShimDir:         c.ShimDir,
		StateDir:        c.StateDir,
		Self:            c.Self,
		Tools:           sortedKeys(c.M.Tools),
		ManifestPath:    c.ManifestPath,
		DefaultManifest: manifest.DefaultTOML(),
	}
}

// Install is `guard install`: it says what it changed and what to run next.
func Install(c *guard.Config, out io.Writer, noRC, force bool) error {
	o := installOptions(c)
	o.NoRC, o.Force = noRC, force
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
	removed, err := removeStaleLinks(c)
	for _, name := range removed {
		r.Changes = append(r.Changes, name)
		fmt.Fprintf(out, "removed %s (no tool of that name in the manifest)\n", filepath.Join(c.ShimDir, name))
	}
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if len(r.Changes) == 0 {
		fmt.Fprintf(out, "guard is already installed in %s; nothing changed\n", c.ShimDir)
	}
	if !shimDirFirst(c) {
		fmt.Fprintf(out, "next: put the shims first in this shell's PATH:\n  export PATH=\"%s:$PATH\"\n", c.ShimDir)
	}
	fmt.Fprintln(out, "then: guard status")
	return nil
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
	if len(r.Changes) == 0 {
		fmt.Fprintln(out, "guard was not installed; nothing changed")
	}
	fmt.Fprintf(out, "kept: the manifest, models, cache (%s) and heal log (%s)\n", c.StateDir, c.LogPath)
	return nil
}

// shimDirFirst reports whether the first PATH entry is the shim folder.
func shimDirFirst(c *guard.Config) bool {
	list := filepath.SplitList(c.PathEnv)
	return len(list) > 0 && sameFile(list[0], c.ShimDir)
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
// manifest guard would use for home.
func ManifestCheck(out io.Writer, file, home string) error {
	m, err := manifest.Load(file, home)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: ok (%d tools, %d models, %d builds)\n", m.Source, len(m.Tools), len(m.Models), len(m.Builds))
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
		if shimState(c.ShimDir, name).State == "missing" {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return
	}
	e.Repair()
	for _, name := range missing {
		if shimState(c.ShimDir, name).State == "ok" {
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
		if _, err := toml.Decode(text.String(), &doc); err != nil {
			return fmt.Errorf("manifest show: %w", err)
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	data := manifest.DefaultTOML()
	if c.M.Source != manifest.EmbeddedSource {
		var err error
		if data, err = os.ReadFile(c.M.Source); err != nil {
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
	fmt.Fprintf(out, "removed %d cached answers (%d bytes)\n", st.Entries, st.Bytes)
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
