package guard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/manifest"
)

// ErrNoHome is LoadConfig's error when HOME is empty: no manifest to fix.
var ErrNoHome = errors.New("HOME is not set; set it to your home folder")

// Config is everything one guard process knows about where things are. It
// is built from the environment and the manifest once per process.
type Config struct {
	Home         string
	M            *manifest.Manifest
	ManifestPath string // the user manifest's path (may not exist yet)
	ShimDir      string
	StateDir     string
	LogPath      string
	Stderr       io.Writer

	log *heallog.Log
}

// LoadConfig reads the environment (the README's "Environment and files")
// and the manifest. Environment variables win over the manifest, which wins
// over the built-in defaults.
func LoadConfig(stderr io.Writer) (*Config, error) {
	home := os.Getenv("HOME")
	if home == "" {
		return nil, ErrNoHome
	}
	m, err := manifest.LoadDecoded("", home, envOr("GUARD_STATE_DIR", filepath.Join(home, ".cache", "guard")))
	if err != nil {
		return nil, err
	}
	c := &Config{
		Home:         home,
		M:            m,
		ManifestPath: manifest.UserPath(home),
		ShimDir:      envOr("GUARD_SHIM_DIR", m.ShimDir),
		StateDir:     envOr("GUARD_STATE_DIR", m.StateDir),
		LogPath:      envOr("GUARD_LOG", m.Log),
		Stderr:       stderr,
	}
	c.ShimDir = expandHome(c.ShimDir, home)
	c.StateDir = expandHome(c.StateDir, home)
	c.LogPath = expandHome(c.LogPath, home)
	c.log = heallog.New(c.LogPath, stderr)
	return c, nil
}

// Event logs one heal event; the log file is opened on the first one.
func (c *Config) Event(e heallog.Event) { c.log.Write(e) }

// Close flushes the heal log.
func (c *Config) Close() { c.log.Close() }

// Say prints a message for a person on stderr, in guard's voice.
func (c *Config) Say(format string, a ...any) {
	Tell(c.Stderr, fmt.Sprintf(format, a...))
}

// Tell writes msg for a person on w with every line starting "guard: ",
// so a hint on a line of its own still reads as guard's.
func Tell(w io.Writer, msg string) {
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		fmt.Fprintln(w, "guard: "+line)
	}
}

// LoadError is a failed LoadConfig explained, with what to do next.
func LoadError(err error) string {
	if errors.Is(err, ErrNoHome) {
		return err.Error()
	}
	return err.Error() + "\nfix the manifest (guard manifest check) or unset GUARD_MANIFEST"
}

// withHint adds what to do about the file-system errors a heal meets most.
func withHint(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return msg + "\na folder guard writes to is read-only or not yours: set GUARD_STATE_DIR (guard's state) or use a writable model folder"
	case errors.Is(err, syscall.ENOSPC):
		return msg + "\nthe disk is full: free space, or put models and GUARD_STATE_DIR on a larger volume"
	}
	return msg
}

// ToolNames lists the tools guard links in the shim folder.
func (c *Config) ToolNames() []string {
	names := make([]string, 0, len(c.M.Tools))
	for name := range c.M.Tools {
		names = append(names, name)
	}
	return names
}

// Repair brings back shims a sandbox evicted; it logs shim.recreate for each.
func (c *Config) Repair() {
	done, err := install.Repair(c.ShimDir, c.StateDir, "/proc/self/exe", c.ToolNames())
	for _, name := range done {
		c.Event(heallog.Event{Event: "shim.recreate", Tool: name, Target: filepath.Join(c.ShimDir, name), Result: "ok"})
	}
	if err != nil {
		c.Event(heallog.Event{Level: "warn", Event: "shim.recreate", Target: c.ShimDir, Result: "failed", Reason: err.Error()})
		c.Say("could not mend the shim folder %s: %v", c.ShimDir, err)
	}
}

// Dir returns a folder below the state folder.
func (c *Config) Dir(name string) string { return filepath.Join(c.StateDir, name) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if len(p) > 1 && p[:2] == "~/" {
		return filepath.Join(home, p[2:])
	}
	return p
}

// depthVar counts nested shim calls in the environment, so that two shim
// managers that each think the other holds the real tool cannot bounce a
// call forever. Legitimate nesting (an npm script calling npx) stays far
// below the limit.
const (
	depthVar = "GUARD_DEPTH"
	maxDepth = 8
)

func callDepth() int {
	n, _ := strconv.Atoi(os.Getenv(depthVar))
	return n
}
