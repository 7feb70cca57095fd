package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/auth"
	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/openclaw"
	"github.com/sandbox-guard/guard/guard/prebuilt"
	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/manifest"
)

// StatusOptions are `guard status` flags.
type StatusOptions struct {
	JSON   bool
	Events int       // how many of the last heal events to show; 0 shows none
	Since  time.Time // only events at or after this; zero means all
	Colour bool      // colour the text report (the caller knows whether out is a terminal)

	logRead func(heallog.Scan) // when set (by a test), is given each read of the log
}

// statusLogScan bounds what status reads of the heal log and its .1, from
// their end: a log shared by many installs costs what this bound costs,
// however few of its events are this install's (docs/exit-status-and-events.md,
// "One log, many installs").
const statusLogScan = 4 << 20

// Status gathers the report, prints it and says whether all is healthy.
func Status(e *guard.Engine, out io.Writer, o StatusOptions) (bool, error) {
	c := e.Config()
	r := gather(e)
	if o.Events > 0 {
		sc, err := heallog.ReadBounded(r.LogPath, o.Events, o.Since, e.Install(), statusLogScan)
		events := sc.Records
		r.OtherEvents, r.OlderEventsNotRead = sc.Others, sc.OlderNotRead
		if o.logRead != nil {
			o.logRead(sc)
		}
		if err != nil {
			// The report is still worth having without its events.
			e.Say("cannot read the heal log: %v; no events shown", err)
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
		Manifest: c.M.Source, ShimDir: c.ShimDir, ShimDirFirst: shimDirFirst(c), Installed: installed(c), LogPath: e.LogPath(),
		Shims: shimStates(c), Tools: []ToolState{}, Builds: []BuildState{}, Packages: []PackageState{},
		Models: []ModelState{}, Auth: []AuthState{}, Events: []heallog.Record{}, Healing: healing(c),
		OpenClaw: openclaw.Check(openclawOptions(c, c.ShimDir)),
	}
	for _, name := range sortedKeys(c.M.Tools) {
		r.Tools = append(r.Tools, toolState(e, c.M.Tools[name]))
	}
	for _, name := range sortedKeys(c.M.Builds) {
		r.Builds = append(r.Builds, buildState(e, c.M.Builds[name]))
	}
	for _, cmd := range sortedKeys(c.M.Packages) {
		r.Packages = append(r.Packages, PackageState{Command: cmd, Package: c.M.Packages[cmd], Present: commandPresent(e, cmd)})
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
	r.Problems = append([]Problem{}, r.problems()...)
	r.NotFetched = r.notFetched()
	r.Healthy = len(r.Problems) == 0
	return r
}

// healing lists the heals running in the background, from their job
// records; a record whose heal is gone is not one.
func healing(c *guard.Config) []HealingState {
	out := []HealingState{}
	now := time.Now()
	for _, s := range healjob.List(c.StateDir) {
		if s.Alive {
			st := healRunning
			switch {
			case s.Stopped():
				st = healStopped
			case s.Stale(now):
				st = healStuck
			}
			out = append(out, HealingState{What: s.What, Names: s.Names, PID: s.PID, Started: s.Start, Percent: s.Percent,
				LeftMS: s.LeftMS, LeftEstimated: s.LeftEstimated, Phase: s.Phase, State: st, Updated: s.Updated,
				Log: healjob.LogPath(c.StateDir, s.Key), Wait: "guard heal --wait " + strings.Join(s.Names, " ")})
		}
	}
	return out
}

// toolState is a tool's real target, healing nothing. A missing binary
// that its recipe never built here (no stamp of it, no good run of the
// recipe) is "not-built": a fresh install, not an eviction.
func toolState(e *guard.Engine, tool *manifest.Tool) ToolState {
	c := e.Config()
	ts := ToolState{Name: tool.Name, Build: tool.Build, Package: tool.Package, State: StateOK}
	h := e.ToolHealth(tool)
	switch {
	case errors.As(h.Err, new(*resolve.NotExecutableError)):
		// There, not evicted: a build recipe's rebuild or the person's
		// chmod (Fix) mends it.
		ts.State, ts.Reason, ts.Fix = StateBroken, h.Err.Error(), h.Fix
	case h.Err != nil && tool.Build != "" && tool.Path != "" && !builtHere(c, tool):
		ts.State, ts.Reason = StateNotBuilt, "never built here: "+tool.Path
	case h.Err != nil:
		ts.State, ts.Reason = StateMissing, h.Err.Error()
	default:
		ts.Target = h.Path
		ts.Libraries, ts.Static = builds.Linkage(h.Path)
		if h.Broken != "" {
			ts.State, ts.Reason = StateBroken, h.Broken
		}
	}
	return ts
}

// builtHere reports whether tool's binary was ever healthy here, or its
// recipe ever ran to a good end here.
func builtHere(c *guard.Config, tool *manifest.Tool) bool {
	if builds.Stamped(c.State().Stamps(), tool.Path) {
		return true
	}
	_, ok := builds.LastBuild(c.StateDir, tool.Build)
	return ok
}

func buildState(e *guard.Engine, b *manifest.Build) BuildState {
	_, err := os.Stat(b.Dir)
	st := BuildState{Name: b.Name, Dir: b.Dir, DirExists: err == nil, Repo: b.Repo, Log: e.BuildLog(b.Name)}
	if last, ok := builds.LastBuild(e.Config().StateDir, b.Name); ok {
		st.BuiltAt, st.BuildMS = last.At, max(last.Took.Milliseconds(), 1)
	}
	items, _ := e.Stash().List() // a stash that cannot be read shows as empty
	st.Stash = stashState(e, items, b)
	if b.Prebuilt != nil {
		c := e.Config()
		st.Prebuilt = &PrebuiltState{GitHub: b.Prebuilt.GitHub, Native: b.Prebuilt.BuildsNative()}
		if st.DirExists {
			tools := c.M.ToolFiles(b.Name)
			if ready, ok := prebuilt.LookCheckout(context.Background(), c.StateDir, b.Name, b.Dir, c.PathEnv, tools); ok {
				st.Prebuilt.Ready, st.Prebuilt.Dir = ready.Tag, ready.Dir
				for _, t := range tools {
					if _, has := ready.Tool(t); !has {
						st.Prebuilt.Lacks = append(st.Prebuilt.Lacks, t)
					}
				}
			}
		}
	}
	return st
}

// commandPresent reports whether a real cmd is on PATH: the shim folder and
// guard itself do not count, or a link made for a tool of that name would
// pass for the installed command.
func commandPresent(e *guard.Engine, cmd string) bool {
	return e.ToolHealth(&manifest.Tool{Name: cmd}).Err == nil
}

func modelState(e *guard.Engine, m *manifest.Model) ModelState {
	c := e.Config()
	path := c.M.ModelsPath(m.File)
	st := ModelState{File: m.File, Path: path, Role: m.Role, Size: m.Size}
	if fi, err := os.Stat(path); err == nil {
		st.OnDisk = fi.Size()
	}
	healer := e.Models()
	st.State = State(healer.Check(m, path))
	st.DeclaredTPS = m.Budget.TokensPerSecond
	st.MeasuredTPS, st.SpeedSamples = e.Speeds().Measured(m.File)
	seen := healer.Seen(m, path)
	if st.State == StateOK {
		st.SHA256DeclaredBy = seen.DeclaredBy
	}
	if st.State == StateMissing && !seen.Ever {
		st.State = StateNotFetched
	}
	if !modelUsable(st.State) && st.State != StateStale {
		st.DownloadBytes = m.Size
		if st.OnDisk == 0 && seen.Partial > 0 && seen.Partial < m.Size {
			st.DownloadBytes -= seen.Partial // resumed, not started over
		}
	}
	if until, reason, ok := healer.LastFailure(path); ok {
		st.RetryAfter, st.Reason = until, reason
	}
	if st.State == StateNotRegular {
		what, rm := models.Kind(path), "rm"
		if what == "a folder" {
			rm = "rmdir" // fails on a folder with something in it: the person looks first
		}
		st.Reason, st.Fix = what+", not a regular file; guard replaces only files it made", builds.QuoteArgv([]string{rm, path})
	}
	return st
}

func authState(c *guard.Config, a *manifest.Auth) AuthState {
	ok, found := auth.Check(a, c.Home, c.Getenv)
	return AuthState{Name: a.Name, OK: ok, Found: found, Hint: a.Hint, For: a.For}
}
