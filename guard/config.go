package guard

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
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

	// Verbose is `guard --verbose`: print each decision of a call on
	// stderr, as GUARD_DEBUG=1 does.
	Verbose bool
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
// the manifest and where guard keeps its files. The "Environment and files"
// section of docs/manifest.md is the contract: an environment variable wins over the
// manifest, which wins over the built-in defaults.
type Config struct {
	World

	Home         string
	M            *manifest.Manifest
	ManifestPath string // the user manifest's path (may not exist yet)
	ShimDir      string
	StateDir     string
	LogPath      string
	// LogFallback is where heal events go when LogPath is the shared
	// default and another user holds it (the per-user log in the state
	// folder); "" when the log was chosen (GUARD_LOG, a manifest's own log).
	LogFallback string

	Timeout       time.Duration // GUARD_TIMEOUT: one call's budget; 0 when unset
	CacheOff      bool          // GUARD_CACHE=off
	Depth         int           // GUARD_DEPTH: nested shim calls so far
	HFToken       string        // HF_TOKEN
	PathEnv       string        // PATH
	ProgressEvery time.Duration // GUARD_PROGRESS_EVERY; 0 means progress's default
	NoColour      bool          // NO_COLOR set, or TERM=dumb
	Debug         bool          // GUARD_DEBUG=1 or --verbose: each decision of a call on stderr
}

// errNoHome is LoadConfig's error when HOME is empty: no manifest to fix.
var errNoHome = errors.New("HOME is not set")

// LoadConfig builds the configuration from w: the environment, then the
// whole manifest (through its decoded copy in the state folder), as the
// commands need it. An environment variable guard cannot read is said on
// w.Stderr, naming it, and treated as unset: a typo must not be ignored
// silently, nor stop the call.
func LoadConfig(w World) (*Config, error) { return loadConfig(w, false) }

// loadConfig is LoadConfig; with lazy (a shim call) the manifest reads
// only the entries the call asks for (manifest.LoadDecoded).
func loadConfig(w World, lazy bool) (*Config, error) {
	home := w.Getenv("HOME")
	if home == "" {
		return nil, &guardError{err: errNoHome, hint: "set HOME to your home folder"}
	}
	// GUARD_STATE_DIR is read before the manifest, which may name another
	// state folder: the decoded manifest must be found before it is read.
	named := w.Getenv("GUARD_MANIFEST")
	m, err := manifest.LoadDecoded(named, home, manifest.ExpandHome(envOr(w, "GUARD_STATE_DIR", manifest.DefaultStateDir), home), lazy)
	if err != nil {
		hint := "fix the manifest (guard manifest check)"
		if named != "" {
			hint += " or unset GUARD_MANIFEST"
		}
		return nil, &guardError{err: err, hint: hint}
	}
	warn := func(msg string) {
		if msg != "" && w.Stderr != nil {
			fmt.Fprintln(w.Stderr, "guard: "+msg)
		}
	}
	timeout, msg := parseTimeout(w.Getenv("GUARD_TIMEOUT"))
	warn(msg)
	depth, msg := parseDepth(w.Getenv(depthVar))
	warn(msg)
	c := &Config{
		World:         w,
		Home:          home,
		M:             m,
		ManifestPath:  cmp.Or(named, manifest.UserPath(home)),
		ShimDir:       manifest.ExpandHome(envOr(w, "GUARD_SHIM_DIR", m.ShimDir), home),
		StateDir:      manifest.ExpandHome(envOr(w, "GUARD_STATE_DIR", m.StateDir), home),
		LogPath:       manifest.ExpandHome(envOr(w, "GUARD_LOG", m.Log), home),
		Timeout:       timeout,
		CacheOff:      w.Getenv("GUARD_CACHE") == "off",
		Depth:         depth,
		HFToken:       w.Getenv("HF_TOKEN"),
		PathEnv:       w.Getenv("PATH"),
		ProgressEvery: parseEvery(w.Getenv("GUARD_PROGRESS_EVERY")),
		NoColour:      w.Getenv("NO_COLOR") != "" || w.Getenv("TERM") == "dumb",
		Debug:         w.Verbose || w.Getenv("GUARD_DEBUG") == "1",
	}
	if w.Getenv("GUARD_LOG") == "" && m.Log == manifest.DefaultLog {
		c.LogFallback = c.State().HealLog()
	}
	return c, nil
}

// State is the layout of guard's state folder.
func (c *Config) State() state.Layout { return state.Layout{Dir: c.StateDir} }

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

// toolEnv is env plus tool's forced variables and one more level of shim
// depth: what the real tool runs with.
func toolEnv(env []string, tool *manifest.Tool, depth int) []string {
	for k, v := range tool.Env {
		env = setEnv(env, k, v)
	}
	return setEnv(env, depthVar, strconv.Itoa(depth+1))
}

// setEnv sets key in env, dropping earlier entries: with a duplicate, a Go
// child (the next guard of a shim loop) reads the first one, so an
// appended GUARD_DEPTH never grew and the loop never ended. env itself is
// left as it is.
func setEnv(env []string, key, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

// parseDepth reads GUARD_DEPTH. A value that is not a count (a typo, a
// negative number that would let a loop run for ever) counts as 0 and is
// said; one too large to read is a loop.
func parseDepth(v string) (int, string) {
	if v == "" {
		return 0, ""
	}
	n, err := strconv.Atoi(v)
	switch {
	case err == nil && n >= 0:
		return min(n, maxDepth), ""
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-"):
		return maxDepth, ""
	}
	return 0, fmt.Sprintf("%s=%q is not a count of nested shim calls; counting from 0", depthVar, v)
}

// maxTimeout bounds GUARD_TIMEOUT, so that "Inf" or "1e10" seconds mean
// "no practical limit" instead of overflowing to a negative budget.
const maxTimeout = 100 * 365 * 24 * time.Hour

// parseTimeout reads GUARD_TIMEOUT: a Go duration ("90s") or seconds. Unset
// or zero is no budget; anything else that is not a positive time is
// ignored with a message naming the variable.
func parseTimeout(v string) (time.Duration, string) {
	if v == "" {
		return 0, ""
	}
	bad := func(why string) (time.Duration, string) {
		return 0, fmt.Sprintf("GUARD_TIMEOUT=%q %s; ignored", v, why)
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return bad("is negative")
		}
		return d, ""
	}
	n, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return bad("is not a duration (90s) or a number of seconds")
	case math.IsNaN(n):
		return bad("is not a number")
	case n < 0:
		return bad("is negative")
	case n >= maxTimeout.Seconds():
		return maxTimeout, ""
	}
	return time.Duration(n * float64(time.Second)), ""
}

// parseEvery reads GUARD_PROGRESS_EVERY; 0 leaves progress its default.
func parseEvery(v string) time.Duration {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	return 0
}
