package guard

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandbox-guard/guard/guard/cache"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/progress"
)

// StatusOptions are `guard status` flags.
type StatusOptions struct {
	JSON   bool
	Events int
	Since  time.Duration
}

// Report is what `guard status --json` prints; the README documents it.
type Report struct {
	Healthy      bool             `json:"healthy"`
	Manifest     string           `json:"manifest"`
	ShimDir      string           `json:"shim_dir"`
	ShimDirFirst bool             `json:"shim_dir_first_in_path"`
	Shims        []ShimState      `json:"shims"`
	Tools        []ToolState      `json:"tools"`
	Builds       []BuildState     `json:"builds"`
	Packages     []PackageState   `json:"packages"`
	Models       []ModelState     `json:"models"`
	Auth         []AuthState      `json:"auth"`
	Cache        cache.Stats      `json:"cache"`
	LogPath      string           `json:"log"`
	Events       []heallog.Record `json:"events"`
}

// ShimState is one entry of the shim folder: "ok", "missing", "dangling" or
// "not-guard" (a file guard did not put there).
type ShimState struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

// ToolState is a tool's real target: "ok", "missing" or "broken".
type ToolState struct {
	Name    string `json:"name"`
	Target  string `json:"target,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Build   string `json:"build,omitempty"`
	Package string `json:"package,omitempty"`
}

// BuildState is a build recipe and whether its source folder is there.
type BuildState struct {
	Name      string `json:"name"`
	Dir       string `json:"dir"`
	DirExists bool   `json:"dir_exists"`
	Log       string `json:"log"`
}

// PackageState is a command from [packages] and whether PATH has it.
type PackageState struct {
	Command string `json:"command"`
	Package string `json:"package"`
	Present bool   `json:"present"`
}

// ModelState is a model file: ok, unverified, missing, truncated, not-gguf,
// hash-mismatch or stale (pinned, hashed again on the next call).
type ModelState struct {
	File       string    `json:"file"`
	Path       string    `json:"path"`
	Role       string    `json:"role,omitempty"`
	Size       int64     `json:"size"`
	OnDisk     int64     `json:"on_disk"`
	State      string    `json:"state"`
	RetryAfter time.Time `json:"retry_after,omitzero"` // a failed heal is not tried again before this
	Reason     string    `json:"reason,omitempty"`
}

// AuthState says whether a credential file is there; missing never blocks a call.
type AuthState struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Found string `json:"found,omitempty"`
	Hint  string `json:"hint,omitempty"`
}

// Status gathers the report, prints it and says whether all is healthy.
func Status(c *Config, out io.Writer, o StatusOptions) (bool, error) {
	r := c.gather()
	var since time.Time
	if o.Since > 0 {
		since = time.Now().Add(-o.Since)
	}
	events, err := heallog.Read(c.LogPath, o.Events, since)
	if err != nil {
		return false, fmt.Errorf("read heal log: %w", err)
	}
	r.Events = events
	if o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return r.Healthy, enc.Encode(r)
	}
	r.print(out, progress.IsTerminal(out))
	return r.Healthy, nil
}

func (c *Config) gather() *Report {
	r := &Report{Manifest: c.M.Source, ShimDir: c.ShimDir, ShimDirFirst: shimDirFirst(c.ShimDir), LogPath: c.LogPath, Healthy: true}
	r.Shims = append(r.Shims, shimState(c.ShimDir, install.GuardName))
	for _, name := range sortedKeys(c.M.Tools) {
		r.Shims = append(r.Shims, shimState(c.ShimDir, name))
		tool := c.M.Tools[name]
		ts := ToolState{Name: name, Build: tool.Build, Package: tool.Package, State: "ok"}
		if path, err := c.resolve(tool); err != nil {
			ts.State, ts.Reason = "missing", err.Error()
		} else if why := c.checkBinary(path); why != "" {
			ts.Target, ts.State, ts.Reason = path, "broken", why
		} else {
			ts.Target = path
		}
		r.Tools = append(r.Tools, ts)
	}
	for _, name := range sortedKeys(c.M.Builds) {
		b := c.M.Builds[name]
		_, err := os.Stat(b.Dir)
		r.Builds = append(r.Builds, BuildState{Name: name, Dir: b.Dir, DirExists: err == nil, Log: c.buildLog(name)})
	}
	for _, cmd := range sortedKeys(c.M.Packages) {
		r.Packages = append(r.Packages, PackageState{Command: cmd, Package: c.M.Packages[cmd], Present: onPath(cmd)})
	}
	for _, m := range c.M.Models {
		r.Models = append(r.Models, c.modelState(m))
	}
	for _, name := range sortedKeys(c.M.Auth) {
		r.Auth = append(r.Auth, c.authState(c.M.Auth[name]))
	}
	r.Cache, _ = c.cacheStore().Stats()
	for _, s := range r.Shims {
		r.Healthy = r.Healthy && s.State == "ok"
	}
	for _, t := range r.Tools {
		r.Healthy = r.Healthy && t.State == "ok"
	}
	for _, m := range r.Models {
		r.Healthy = r.Healthy && (m.State == "ok" || m.State == "unverified")
	}
	r.Healthy = r.Healthy && r.ShimDirFirst
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

func onPath(cmd string) bool {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if fi, err := os.Stat(filepath.Join(dir, cmd)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}

// print writes the report for a person: grouped, aligned, coloured on a
// terminal, plain text otherwise.
func (r *Report) print(out io.Writer, colour bool) {
	mark := func(ok bool, word string) string {
		if !colour {
			return word
		}
		if ok {
			return "\x1b[32m" + word + "\x1b[0m"
		}
		return "\x1b[31m" + word + "\x1b[0m"
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	section := func(title string) { fmt.Fprintf(tw, "\n%s\n", title) }
	overall := "healthy"
	if !r.Healthy {
		overall = "needs healing (guard heal)"
	}
	fmt.Fprintf(tw, "guard: %s\n", mark(r.Healthy, overall))
	fmt.Fprintf(tw, "manifest\t%s\n", r.Manifest)
	section("shims")
	first := "yes"
	if !r.ShimDirFirst {
		first = "no: export PATH=\"" + r.ShimDir + ":$PATH\""
	}
	fmt.Fprintf(tw, "  folder\t%s\tfirst in PATH: %s\n", r.ShimDir, mark(r.ShimDirFirst, first))
	for _, s := range r.Shims {
		fmt.Fprintf(tw, "  %s\t%s\t\n", s.Name, mark(s.State == "ok", s.State))
	}
	section("tools")
	for _, t := range r.Tools {
		detail := t.Target
		if t.Reason != "" {
			detail = t.Reason
		}
		heal := ""
		if t.Build != "" {
			heal = "build " + t.Build
		} else if t.Package != "" {
			heal = "package " + t.Package
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, mark(t.State == "ok", t.State), oneLine(detail), heal)
	}
	if len(r.Builds) > 0 {
		section("builds")
		for _, b := range r.Builds {
			src := "source present"
			if !b.DirExists {
				src = "source missing"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\tlog %s\n", b.Name, b.Dir, mark(b.DirExists, src), b.Log)
		}
	}
	if len(r.Packages) > 0 {
		section("packages")
		for _, p := range r.Packages {
			state := "present"
			if !p.Present {
				state = "missing (installed when a heal needs it)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Command, p.Package, mark(p.Present, state))
		}
	}
	if len(r.Models) > 0 {
		section("models")
		for _, m := range r.Models {
			ok := m.State == "ok" || m.State == "unverified"
			extra := fmt.Sprintf("%d/%d bytes", m.OnDisk, m.Size)
			if !m.RetryAfter.IsZero() {
				extra += fmt.Sprintf("; last heal failed (%s), retried after %s or by guard heal", m.Reason, m.RetryAfter.Format(time.Kitchen))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", m.File, m.Role, mark(ok, m.State), extra)
		}
	}
	if len(r.Auth) > 0 {
		section("auth")
		for _, a := range r.Auth {
			state := "ok " + a.Found
			if !a.OK {
				state = "missing: " + a.Hint
			}
			fmt.Fprintf(tw, "  %s\t%s\n", a.Name, mark(a.OK, state))
		}
	}
	section("cache")
	fmt.Fprintf(tw, "  %d entries, %d bytes, %d hits, %d misses, %.1fs saved\n", r.Cache.Entries, r.Cache.Bytes, r.Cache.Hits, r.Cache.Misses, r.Cache.SavedSeconds)
	section("heal events (" + r.LogPath + ")")
	if len(r.Events) == 0 {
		fmt.Fprintln(tw, "  none")
	}
	for _, e := range r.Events {
		dur := ""
		if e.DurationMS > 0 {
			dur = (time.Duration(e.DurationMS) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", e.TS.Local().Format("15:04:05"), e.Event, e.Tool, oneLine(firstOf(e.Target, e.Reason)), e.Result, dur)
	}
	tw.Flush()
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
