package guard

import (
	"cmp"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// World is everything a guard process takes from outside itself: the
// environment, its standard descriptors and whether they are terminals.
// cmd/guard reads it once, at the edge; nothing below reads the process's
// environment or descriptors again, so the engine can be run on any World
// (a test's, a swarm role's).
type World struct {
	Env    []string // KEY=VALUE, as os.Environ returns it
	Stdin  *os.File
	Stdout io.Writer
	Stderr io.Writer

	StdinTTY  bool
	StdoutTTY bool

	// Self is guard's own executable as the kernel knows it: readable even
	// when the file it came from was deleted ("/proc/self/exe").
	Self string
}

// Getenv returns the value of key in the World's environment ("" when unset).
func (w World) Getenv(key string) string {
	v, _ := w.LookupEnv(key)
	return v
}

// LookupEnv is os.LookupEnv over the World's environment; the last entry of
// a duplicated key wins, as it does for a shell.
func (w World) LookupEnv(key string) (string, bool) {
	for i := len(w.Env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(w.Env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// Config is one guard process's configuration as a plain value: the World,
// the manifest and where guard keeps its files. The README's "Environment
// and files" section is the contract: an environment variable wins over the
// manifest, which wins over the built-in defaults.
type Config struct {
	World

	Home         string
	M            *manifest.Manifest
	ManifestPath string // the user manifest's path (may not exist yet)
	ShimDir      string
	StateDir     string
	LogPath      string

	Timeout       time.Duration // GUARD_TIMEOUT: one call's budget; 0 when unset
	CacheOff      bool          // GUARD_CACHE=off
	Depth         int           // GUARD_DEPTH: nested shim calls so far
	HFToken       string        // HF_TOKEN
	PathEnv       string        // PATH
	ProgressEvery time.Duration // GUARD_PROGRESS_EVERY; 0 means progress's default
	NoColour      bool          // NO_COLOR set, or TERM=dumb
}

// errNoHome is LoadConfig's error when HOME is empty: no manifest to fix.
var errNoHome = errors.New("HOME is not set; set it to your home folder")

// LoadConfig builds the configuration from w: the environment, then the
// manifest (through its decoded cache in the state folder).
func LoadConfig(w World) (*Config, error) {
	home := w.Getenv("HOME")
	if home == "" {
		return nil, &guardError{err: errNoHome}
	}
	// GUARD_STATE_DIR is read before the manifest, which may name another
	// state folder: the decoded manifest must be found before it is read.
	named := w.Getenv("GUARD_MANIFEST")
	m, err := manifest.LoadDecoded(named, home, manifest.ExpandHome(envOr(w, "GUARD_STATE_DIR", manifest.DefaultStateDir), home))
	if err != nil {
		return nil, &guardError{err: err, hint: "fix the manifest (guard manifest check) or unset GUARD_MANIFEST"}
	}
	c := &Config{
		World:         w,
		Home:          home,
		M:             m,
		ManifestPath:  cmp.Or(named, manifest.UserPath(home)),
		ShimDir:       manifest.ExpandHome(envOr(w, "GUARD_SHIM_DIR", m.ShimDir), home),
		StateDir:      manifest.ExpandHome(envOr(w, "GUARD_STATE_DIR", m.StateDir), home),
		LogPath:       manifest.ExpandHome(envOr(w, "GUARD_LOG", m.Log), home),
		Timeout:       parseTimeout(w.Getenv("GUARD_TIMEOUT")),
		CacheOff:      w.Getenv("GUARD_CACHE") == "off",
		Depth:         parseDepth(w.Getenv(depthVar)),
		HFToken:       w.Getenv("HF_TOKEN"),
		PathEnv:       w.Getenv("PATH"),
		ProgressEvery: parseEvery(w.Getenv("GUARD_PROGRESS_EVERY")),
		NoColour:      w.Getenv("NO_COLOR") != "" || w.Getenv("TERM") == "dumb",
	}
	return c, nil
}

// State is the layout of guard's state folder.
func (c *Config) State() state.Layout { return state.Layout{Dir: c.StateDir} }

// toolNames lists the tools guard links in the shim folder.
func (c *Config) toolNames() []string {
	names := make([]string, 0, len(c.M.Tools))
	for name := range c.M.Tools {
		names = append(names, name)
	}
	return names
}

// tool returns the manifest's entry for name, or a bare one for a name the
// manifest does not know (a link made by hand: resolved and run, nothing
// more).
func (c *Config) tool(name string) *manifest.Tool {
	if t := c.M.Tool(name); t != nil {
		return t
	}
	return &manifest.Tool{Name: name}
}

func envOr(w World, name, def string) string {
	if v := w.Getenv(name); v != "" {
		return v
	}
	return def
}

// depthVar counts nested shim calls in the environment, so that two shim
// managers that each think the other holds the real tool cannot bounce a
// call forever. Legitimate nesting (an npm script calling npx) stays far
// below the limit.
const (
	depthVar = "GUARD_DEPTH"
	maxDepth = 8
)

func parseDepth(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}

// parseTimeout reads GUARD_TIMEOUT: a Go duration ("90s") or seconds; 0
// when unset or unreadable.
func parseTimeout(v string) time.Duration {
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	return 0
}

// parseEvery reads GUARD_PROGRESS_EVERY; 0 leaves progress its default.
func parseEvery(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	return 0
}
