package guard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sandbox-guard/guard/guard/auth"
	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/manifest"
)

// checkBinary returns "" when the executable at path is healthy (present,
// executable, every shared library resolvable), else why not.
func (c *Config) checkBinary(path string) string {
	h := builds.CheckBinary(path, c.builder().StampDir())
	if h.OK {
		return ""
	}
	return h.Reason
}

func (c *Config) builder() *builds.Builder {
	return &builds.Builder{
		StateDir:    c.StateDir,
		Log:         c.Event,
		Stderr:      c.Stderr,
		Packages:    c.M.Packages,
		HealTimeout: c.M.Budget.Heal.D(),
		// Env nil: the builder reads guard's environment when a build runs,
		// not on every health check.
	}
}

func (c *Config) buildLog(name string) string { return c.builder().LogPath(name) }

// healBinary brings back tool's executable after resolving or checking it
// failed with why: its build recipe rebuilds it, else its Debian package
// reinstalls it.
func (c *Config) healBinary(ctx context.Context, tool *manifest.Tool, why error) error {
	switch {
	case tool.Build != "":
		rec := c.M.Builds[tool.Build]
		if rec == nil {
			return fmt.Errorf("%v\nthe manifest names build %q, which it does not define", why, tool.Build)
		}
		if tool.Path == "" {
			return fmt.Errorf("%v\n[tools.%s] needs a path for build %q to produce", why, tool.Name, tool.Build)
		}
		ctx, cancel := context.WithTimeout(ctx, healTimeout(rec.Timeout.D(), c.M.Budget.Heal.D()))
		defer cancel()
		return underSignals(ctx, func(ctx context.Context) error {
			return c.builder().Build(ctx, tool.Name, rec, tool.Path)
		})
	case tool.Package != "":
		ctx, cancel := context.WithTimeout(ctx, c.M.Budget.Heal.D())
		defer cancel()
		return underSignals(ctx, func(ctx context.Context) error {
			return c.builder().InstallPackages(ctx, tool.Name, []string{tool.Package})
		})
	}
	return fmt.Errorf("%v\n%s", why, noHealHint(tool))
}

func healTimeout(own, def time.Duration) time.Duration {
	if own > 0 {
		return own
	}
	return def
}

// ensureModel makes the model file at path good before a llama call loads
// it: a manifest model is healed (downloaded, verified), an unknown one only
// checked. It returns a message for the person when that is impossible.
func (c *Config) ensureModel(ctx context.Context, tool, path string, force bool) error {
	m := c.M.ModelByFile(filepath.Base(path))
	if m == nil {
		if err := models.CheckUnknown(path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("model %s is missing and the manifest does not know it; add a [[models]] entry with file = %q, size and urls to %s so guard can fetch it", path, filepath.Base(path), c.ManifestPath)
			}
			return fmt.Errorf("model %s: %v (the manifest does not know this file, so guard cannot fetch it)", path, err)
		}
		return nil
	}
	if c.healer().Check(m, path).Healthy() {
		return nil // the fast path: no signal handler, no goroutine
	}
	return underSignals(ctx, func(ctx context.Context) error {
		return c.healer().Ensure(ctx, tool, m, path, force)
	})
}

func (c *Config) modelState(m *manifest.Model) ModelState {
	path := c.M.ModelsPath(m.File)
	st := ModelState{File: m.File, Path: path, Role: m.Role, Size: m.Size}
	if fi, err := os.Stat(path); err == nil {
		st.OnDisk = fi.Size()
	}
	st.State = string(c.healer().Check(m, path))
	if until, reason, ok := c.healer().LastFailure(path); ok {
		st.RetryAfter, st.Reason = until, reason
	}
	return st
}

func (c *Config) healer() *models.Healer {
	return &models.Healer{
		StateDir:    c.StateDir,
		Log:         c.Event,
		Stderr:      c.Stderr,
		HealTimeout: c.M.Budget.Heal.D(),
		Token:       os.Getenv("HF_TOKEN"),
	}
}

func (c *Config) authState(a *manifest.Auth) AuthState {
	ok, found := auth.Check(a, c.Home, os.Getenv)
	return AuthState{Name: a.Name, OK: ok, Found: found, Hint: a.Hint}
}
