package commands

import (
	"cmp"
	"slices"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/openclaw"
)

// Report is what `guard status --json` prints; docs/status-json.md documents it.
// Every list is present (possibly empty), never null.
type Report struct {
	Healthy      bool             `json:"healthy"`
	Problems     []Problem        `json:"problems"`
	NotFetched   []string         `json:"not_fetched"`
	Manifest     string           `json:"manifest"`
	ShimDir      string           `json:"shim_dir"`
	ShimDirFirst bool             `json:"shim_dir_first_in_path"`
	Installed    bool             `json:"installed"`
	Shims        []ShimState      `json:"shims"`
	Tools        []ToolState      `json:"tools"`
	Builds       []BuildState     `json:"builds"`
	Packages     []PackageState   `json:"packages"`
	Models       []ModelState     `json:"models"`
	Auth         []AuthState      `json:"auth"`
	Cache        CacheState       `json:"cache"`
	Healing      []HealingState   `json:"healing"`
	OpenClaw     openclaw.Status  `json:"openclaw"`
	LogPath      string           `json:"log"`
	Events       []heallog.Record `json:"events"`
	OtherEvents  int              `json:"other_installs_events"` // events of other installs (or unmarked) read past and left out of events
	// OlderEventsNotRead: the read stopped at its bound (statusLogScan)
	// with older lines of the log unread.
	OlderEventsNotRead bool `json:"older_events_not_read"`
}

// Problem is one thing that keeps the report from being healthy, and the
// command that fixes it (status and heal agree on both). Names in What are
// printable (Go-quoted when they hold a control character).
type Problem struct {
	What string `json:"what"` // "tool llama-completion", "PATH order"
	Fix  string `json:"fix"`  // "guard heal", "guard heal --wait NAME", "guard install", an export PATH line
}

// ShimState is one entry of the shim folder: "ok" (a hard link to
// guard's copy, or a copy of it where no hard link can be made),
// "missing", "outdated" (guard's, not yet linked to its copy: an older
// install's symlink, or an older guard's link), "not-guard" (a file or
// link guard did not put there), "stale" (a link to guard for a tool the
// manifest no longer has; not a problem, heal removes it) or, for guard's
// own copy, "broken" (empty or cut off).
type ShimState struct {
	Name  string `json:"name"`
	State State  `json:"state"`
}

// ToolState is a tool's real target: "ok", "missing", "broken" or
// "not-built" (its recipe never built it here: a fresh install, not an
// eviction). Libraries are the shared libraries the target names
// (DT_NEEDED); a broken target's Reason names the ones that do not resolve.
type ToolState struct {
	Name      string   `json:"name"`
	Target    string   `json:"target,omitempty"`
	State     State    `json:"state"`
	Reason    string   `json:"reason,omitempty"`
	Libraries []string `json:"libraries,omitempty"`
	Static    bool     `json:"static,omitempty"`
	Build     string   `json:"build,omitempty"`
	Package   string   `json:"package,omitempty"`
	Fix       string   `json:"fix,omitempty"` // what only the person can do: no heal fixes it
}

// BuildState is a build recipe, whether its source folder is there, its
// last good run here (what a rebuild costs; none when it never built
// here), and its stash entries.
type BuildState struct {
	Name      string     `json:"name"`
	Dir       string     `json:"dir"`
	DirExists bool       `json:"dir_exists"`
	Repo      string     `json:"repo,omitempty"`
	Log       string     `json:"log"`
	BuiltAt   time.Time  `json:"built_at,omitzero"`
	BuildMS   int64      `json:"build_ms,omitempty"`
	Stash     StashState `json:"stash"`
	// Prebuilt is the recipe's [builds.NAME.prebuilt], when it has one
	// (docs/prebuilt.md).
	Prebuilt *PrebuiltState `json:"prebuilt,omitempty"`
}

// PrebuiltState is a recipe's release build: where it comes from, whether
// the native build is made after it, and the release ready for the
// checkout's HEAD ("" when none is).
type PrebuiltState struct {
	GitHub string `json:"github"`
	Native bool   `json:"native"`
	Ready  string `json:"ready,omitempty"` // the release's tag
	Dir    string `json:"dir,omitempty"`   // where it is unpacked
	// Lacks are the recipe's tools the release does not make: their
	// calls build them natively, even with native = false.
	Lacks []string `json:"lacks,omitempty"`
}

// PackageState is a command from [packages] and whether PATH has it.
type PackageState struct {
	Command string `json:"command"`
	Package string `json:"package"`
	Present bool   `json:"present"`
}

// ModelState is a model file: ok, unverified, missing (evicted: it was
// here), not-fetched (never downloaded here), truncated, not-gguf,
// hash-mismatch, stale (pinned, hashed again on the next call) or
// not-regular (a FIFO, device, socket or folder guard will not replace:
// Fix says what the person runs). DownloadBytes is what a heal would
// download.
type ModelState struct {
	File          string    `json:"file"`
	Path          string    `json:"path"`
	Role          string    `json:"role,omitempty"`
	Size          int64     `json:"size"`
	OnDisk        int64     `json:"on_disk"`
	State         State     `json:"state"`
	DownloadBytes int64     `json:"download_bytes,omitempty"`
	RetryAfter    time.Time `json:"retry_after,omitzero"` // a failed heal is not tried again before this
	Reason        string    `json:"reason,omitempty"`
	// SHA256DeclaredBy names who declared the sha256 an ok model was
	// verified against: "manifest" (a pin) or the url whose X-Linked-Etag
	// gave it.
	SHA256DeclaredBy string `json:"sha256_declared_by,omitempty"`
	Fix              string `json:"fix,omitempty"` // what only the person can do: no heal fixes it
	// Speeds in tokens per second: the manifest's (the prior of every
	// budget) and the low percentile of the last calls on this machine.
	DeclaredTPS  float64 `json:"declared_tps,omitempty"`
	MeasuredTPS  float64 `json:"measured_tps,omitempty"`
	SpeedSamples int     `json:"speed_samples,omitempty"`
}

// AuthState says whether a credential file is there; missing never blocks a call.
type AuthState struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Found string `json:"found,omitempty"`
	Hint  string `json:"hint,omitempty"`
	For   string `json:"for,omitempty"` // what needs it; nothing else does
}

// missingNote says what needs a missing credential (the manifest's for)
// and that no call waits on it.
func (a AuthState) missingNote() string {
	if a.For == "" {
		return "never blocks a call"
	}
	return "needed only by " + a.For + " (nothing else needs it; never blocks a call)"
}

// HealingState is a heal a call left running in the background (its job
// record): what it heals, how far it is (Percent and LeftMS are -1 while
// unknown), whether it runs, is stopped or is stuck (State), and the
// command that waits for it.
type HealingState struct {
	What    string    `json:"what"`
	Names   []string  `json:"names"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Percent float64   `json:"percent"`
	LeftMS  int64     `json:"left_ms"`
	// LeftEstimated: LeftMS comes from the heal's own rate so far (a first
	// build), not from the last build's length.
	LeftEstimated bool      `json:"left_estimated,omitempty"`
	Phase         string    `json:"phase,omitempty"`
	State         string    `json:"state"`   // running, stopped (its process is in state T) or stuck (its record stale past its limit)
	Updated       time.Time `json:"updated"` // when its record was last updated
	Log           string    `json:"log"`
	Wait          string    `json:"wait"`
}

// The states of a heal in the background (HealingState.State).
const (
	healRunning = "running"
	healStopped = "stopped"
	healStuck   = "stuck"
)

// CacheState is the prompt cache's figures.
type CacheState struct {
	Entries      int     `json:"entries"`
	Bytes        int64   `json:"bytes"`
	Hits         int64   `json:"hits"`
	Misses       int64   `json:"misses"`
	SavedSeconds float64 `json:"saved_seconds"`
}

// What fixes each kind of problem; status and heal name the same one.
const (
	fixHeal         = "guard heal"
	fixInstall      = "guard install"
	fixInstallForce = "guard install --force"
)

// fixPath is the line that puts the shim folder first in this shell.
func fixPath(shimDir string) string { return install.ExportPath(shimDir) }

// problems lists what keeps the report from being healthy and what fixes
// each: guard not installed (install), a file in the way of a shim
// (install --force), the shim folder not first in PATH (an export line
// only the caller's shell can run), an OpenClaw whose exec tool does not
// put the shim folder first (install, unless install --no-openclaw said
// to leave it), a shim, tool or model a heal brings
// back, a stash_to push not yet made (a heal starts it again), or the
// command only the person can run (a tool's or model's Fix).
// A tool never built or a model never fetched here is not a problem
// (a fresh install is not an emergency: see notFetched), nor is a stale
// link, a missing package or missing auth: packages are installed when a
// heal needs them, auth never blocks a call.
func (r *Report) problems() []Problem {
	var out []Problem
	add := func(what, fix string) { out = append(out, Problem{what, fix}) }
	if !r.Installed {
		add("guard", fixInstall)
	}
	if !r.ShimDirFirst {
		add("PATH order", fixPath(r.ShimDir))
	}
	if oc := r.OpenClaw; oc.Found && !oc.Protected && !oc.Declined {
		add("OpenClaw exec", oc.Fix)
	}
	for _, s := range r.Shims {
		switch {
		case s.State == StateNotGuard:
			add("shim "+printable(s.Name), fixInstallForce)
		case r.Installed && s.State != StateOK && s.State != StateStale:
			add("shim "+printable(s.Name), fixHeal)
		}
	}
	for _, t := range r.Tools {
		if t.State != StateOK && t.State != StateNotBuilt {
			add("tool "+printable(t.Name), cmp.Or(t.Fix, r.waitFor(t.Name), fixHeal))
		}
	}
	for _, m := range r.Models {
		if !modelUsable(m.State) && m.State != StateNotFetched {
			add("model "+printable(m.File), cmp.Or(m.Fix, r.waitFor(m.File), fixHeal))
		}
	}
	for _, b := range r.Builds {
		if b.Stash.NotPushed != nil {
			add("stash_to of "+printable(b.Name), fixHeal)
		}
	}
	return out
}

// waitFor is the command that waits for the heal running in the
// background for name (a tool or a model file), "" when none runs: while
// it runs, a second heal would only wait for it too.
func (r *Report) waitFor(name string) string {
	for _, h := range r.Healing {
		if slices.Contains(h.Names, name) {
			return h.Wait
		}
	}
	return ""
}

// healingFix reports whether fix is the command that waits for a heal
// running in the background.
func (r *Report) healingFix(fix string) bool {
	return slices.ContainsFunc(r.Healing, func(h HealingState) bool { return h.Wait == fix })
}

// notFetched names the tools never built and the models never fetched here.
func (r *Report) notFetched() []string {
	out := []string{}
	for _, t := range r.Tools {
		if t.State == StateNotBuilt {
			out = append(out, "tool "+printable(t.Name))
		}
	}
	for _, m := range r.Models {
		if m.State == StateNotFetched {
			out = append(out, "model "+printable(m.File))
		}
	}
	return out
}
