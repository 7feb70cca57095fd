package commands

import (
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
)

// Report is what `guard status --json` prints; the README documents it.
// Every list is present (possibly empty), never null.
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
	Cache        CacheState       `json:"cache"`
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
// Libraries are the shared libraries the target names (DT_NEEDED); a
// broken target's Reason names the ones that do not resolve.
type ToolState struct {
	Name      string   `json:"name"`
	Target    string   `json:"target,omitempty"`
	State     string   `json:"state"`
	Reason    string   `json:"reason,omitempty"`
	Libraries []string `json:"libraries,omitempty"`
	Static    bool     `json:"static,omitempty"`
	Build     string   `json:"build,omitempty"`
	Package   string   `json:"package,omitempty"`
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
}

// CacheState is the prompt cache's figures.
type CacheState struct {
	Entries      int     `json:"entries"`
	Bytes        int64   `json:"bytes"`
	Hits         int64   `json:"hits"`
	Misses       int64   `json:"misses"`
	SavedSeconds float64 `json:"saved_seconds"`
}

// needsHealing names what keeps the report from being healthy: a shim that
// is not ok, a tool missing or broken, a model a call could not use, or the
// shim folder not first in PATH. Missing packages and auth never count:
// packages are installed when a heal needs them, auth never blocks a call.
func (r *Report) needsHealing() []string {
	var out []string
	if !r.ShimDirFirst {
		out = append(out, "PATH order")
	}
	for _, s := range r.Shims {
		if s.State != "ok" {
			out = append(out, "shim "+s.Name)
		}
	}
	for _, t := range r.Tools {
		if t.State != "ok" {
			out = append(out, "tool "+t.Name)
		}
	}
	for _, m := range r.Models {
		if !modelUsable(m.State) {
			out = append(out, "model "+m.File)
		}
	}
	return out
}

func modelUsable(state string) bool { return state == "ok" || state == "unverified" }
