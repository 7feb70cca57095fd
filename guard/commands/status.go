package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/auth"
	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/manifest"
)

// StatusOptions are `guard status` flags.
type StatusOptions struct {
	JSON   bool
	Events int       // how many of the last heal events to show; 0 shows none
	Since  time.Time // only events at or after this; zero means all
	Colour bool      // colour the text report (the caller knows whether out is a terminal)
}

// Status gathers the report, prints it and says whether all is healthy.
func Status(e *guard.Engine, out io.Writer, o StatusOptions) (bool, error) {
	c := e.Config()
	r := gather(e)
	if o.Events > 0 {
		events, err := heallog.Read(r.LogPath, o.Events, o.Since)
		if err != nil {
			// A log that is not a file (a FIFO someone planted) must not
			// hide the rest of the report.
			e.Say("cannot read the heal log: %v", err)
		}
		r.Events = append(r.Events, events...)
	}
	if o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return r.Healthy, enc.Encode(r)
	}
	p := &printer{colour: o.Colour, home: c.Home, showEvents: o.Events > 0}
	p.print(out, r)
	return r.Healthy, nil
}

// UseColour reports whether the text report on stdout should be coloured:
// only on a terminal, and never when NO_COLOR is set or TERM is dumb.
func UseColour(c *guard.Config) bool { return c.StdoutTTY && !c.NoColour }

// ParseSince reads a --since value: a duration back from now (30m, 2h, 1d)
// or a local date or time (2026-08-01, 2026-08-01T15:04, RFC 3339).
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad --since %q: want a duration (30m, 2h, 1d) or a time (2026-08-01, 2026-08-01T15:04)", s)
}

func gather(e *guard.Engine) *Report {
	c := e.Config()
	r := &Report{
		Manifest: c.M.Source, ShimDir: c.ShimDir, ShimDirFirst: shimDirFirst(c), LogPath: e.LogPath(), Healthy: true,
		Shims: []ShimState{}, Tools: []ToolState{}, Builds: []BuildState{}, Packages: []PackageState{},
		Models: []ModelState{}, Auth: []AuthState{}, Events: []heallog.Record{},
	}
	r.Shims = append(r.Shims, shimState(c.ShimDir, install.GuardName))
	for _, name := range sortedKeys(c.M.Tools) {
		r.Shims = append(r.Shims, shimState(c.ShimDir, name))
		tool := c.M.Tools[name]
		ts := ToolState{Name: name, Build: tool.Build, Package: tool.Package, State: "ok"}
		if h := e.ToolHealth(tool); h.Err != nil {
			ts.State, ts.Reason = "missing", h.Err.Error()
		} else {
			ts.Target = h.Path
			ts.Libraries, ts.Static = builds.Linkage(h.Path)
			if h.Broken != "" {
				ts.State, ts.Reason = "broken", h.Broken
			}
		}
		r.Tools = append(r.Tools, ts)
	}
	for _, name := range sortedKeys(c.M.Builds) {
		b := c.M.Builds[name]
		_, err := os.Stat(b.Dir)
		r.Builds = append(r.Builds, BuildState{Name: name, Dir: b.Dir, DirExists: err == nil, Log: e.BuildLog(name)})
	}
	for _, cmd := range sortedKeys(c.M.Packages) {
		r.Packages = append(r.Packages, PackageState{Command: cmd, Package: c.M.Packages[cmd], Present: onPath(cmd, c.PathEnv)})
	}
	for _, m := range c.M.Models {
		r.Models = append(r.Models, modelState(e, m))
	}
	for _, name := range sortedKeys(c.M.Auth) {
		r.Auth = append(r.Auth, authState(c, c.M.Auth[name]))
	}
	if st, err := e.PromptCache().Stats(); err == nil {
		r.Cache = CacheState{Entries: st.Entries, Bytes: st.Bytes, Hits: st.Hits, Misses: st.Misses, SavedSeconds: st.SavedSeconds}
	}
	r.Healthy = len(r.needsHealing()) == 0
	return r
}

func shimState(dir, name string) ShimState {
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	switch {
	case err != nil:
		return ShimState{name, "missing"}
	case name == install.GuardName:
		return ShimState{name, "ok"}
	case fi.Mode()&os.ModeSymlink == 0:
		return ShimState{name, "not-guard"}
	}
	if _, err := os.Stat(p); err != nil {
		return ShimState{name, "dangling"}
	}
	if t, _ := os.Readlink(p); t != install.GuardName && t != filepath.Join(dir, install.GuardName) {
		return ShimState{name, "not-guard"}
	}
	return ShimState{name, "ok"}
}

// onPath reports whether PATH has cmd.
func onPath(cmd, pathEnv string) bool {
	_, ok := resolve.LookPath(cmd, pathEnv)
	return ok
}

func modelState(e *guard.Engine, m *manifest.Model) ModelState {
	path := e.Config().M.ModelsPath(m.File)
	st := ModelState{File: m.File, Path: path, Role: m.Role, Size: m.Size}
	if fi, err := os.Stat(path); err == nil {
		st.OnDisk = fi.Size()
	}
	healer := e.Models()
	st.State = string(healer.Check(m, path))
	if until, reason, ok := healer.LastFailure(path); ok {
		st.RetryAfter, st.Reason = until, reason
	}
	st.DeclaredTPS = m.Budget.TokensPerSecond
	st.MeasuredTPS, st.SpeedSamples = e.Speeds().Measured(m.File)
	return st
}

func authState(c *guard.Config, a *manifest.Auth) AuthState {
	ok, found := auth.Check(a, c.Home, c.Getenv)
	return AuthState{Name: a.Name, OK: ok, Found: found, Hint: a.Hint}
}
