package guard

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/promptcache"
	"github.com/sandbox-guard/guard/manifest"
)

func (c *Config) installOptions() install.Options {
	return install.Options{
		Home:            c.Home,
		ShimDir:         c.ShimDir,
		StateDir:        c.StateDir,
		Self:            "/proc/self/exe", // readable even when the file it came from was deleted
		Tools:           c.ToolNames(),
		ManifestPath:    c.ManifestPath,
		DefaultManifest: manifest.DefaultTOML(),
	}
}

// Install is `guard install`: it says what it changed and what to run next.
func Install(c *Config, out io.Writer, noRC, force bool) error {
	o := c.installOptions()
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
	if len(r.Changes) == 0 {
		fmt.Fprintf(out, "guard is already installed in %s; nothing changed\n", c.ShimDir)
	}
	if !shimDirFirst(c.ShimDir) {
		fmt.Fprintf(out, "next: put the shims first in this shell's PATH:\n  export PATH=\"%s:$PATH\"\n", c.ShimDir)
	}
	fmt.Fprintln(out, "then: guard status")
	return nil
}

// Uninstall is `guard uninstall`.
func Uninstall(c *Config, out io.Writer) error {
	r, err := install.Uninstall(c.installOptions())
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
func shimDirFirst(shimDir string) bool {
	list := filepath.SplitList(os.Getenv("PATH"))
	return len(list) > 0 && sameFile(list[0], shimDir)
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
// manifest guard would use.
func ManifestCheck(out io.Writer, file string) error {
	home := os.Getenv("HOME")
	m, err := manifest.Load(file, home)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: ok (%d tools, %d models, %d builds)\n", m.Source, len(m.Tools), len(m.Models), len(m.Builds))
	return nil
}

func (c *Config) cacheStore() *promptcache.Store {
	return &promptcache.Store{Dir: c.Dir("prompts"), MaxBytes: c.M.Cache.MaxBytes, TTL: c.M.Cache.TTL.D()}
}

// CacheStats is `guard cache stats`.
func CacheStats(c *Config, out io.Writer) error {
	st, err := c.cacheStore().Stats()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read cache: %w", err)
	}
	fmt.Fprintf(out, "entries  %d\nbytes    %d\nhits     %d\nmisses   %d\nsaved    %.1fs\nfolder   %s\n",
		st.Entries, st.Bytes, st.Hits, st.Misses, st.SavedSeconds, c.Dir("prompts"))
	return nil
}

// CacheClear is `guard cache clear`.
func CacheClear(c *Config, out io.Writer) error {
	st, _ := c.cacheStore().Stats()
	if err := c.cacheStore().Clear(); err != nil {
		return fmt.Errorf("clear cache: %w", err)
	}
	fmt.Fprintf(out, "removed %d cached answers (%d bytes)\n", st.Entries, st.Bytes)
	return nil
}

// sortedKeys returns a map's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
