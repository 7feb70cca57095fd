package guard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/models/verify"
)

// Models is the model healer over guard's state folder: checks, downloads,
// the memory of failed heals. It is shared by every use.
func (e *Engine) Models() *models.Healer { return e.models() }

// stateFault reports whether err is guard's own state folder failing (a
// lock or a stamp it cannot write), not the thing being healed: then the
// call goes on without the heal (docs/exit-status-and-events.md: "When guard cannot work").
func (e *Engine) stateFault(err error) bool {
	var pe *fs.PathError
	if e.c.StateDir == "" || !errors.As(err, &pe) {
		return false
	}
	rel, rerr := filepath.Rel(e.c.StateDir, pe.Path)
	return rerr == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// ensureModel makes the model file at path good before a llama call loads
// it: a manifest model is healed (downloaded, verified), an unknown one only
// checked. A model the call cannot have is a *healError saying why.
func (e *Engine) ensureModel(ctx context.Context, tool, path string, force bool) error {
	return e.ensureModelWaiting(ctx, tool, path, force, nil)
}

// ensureModelWaiting is ensureModel whose wait for the heal is bounded by
// wait(ctx) (a llama call's modelWait), asked only once the model is found
// to need a heal: a healthy model is looked at once, as on every call.
func (e *Engine) ensureModelWaiting(ctx context.Context, tool, path string, force bool, wait func(context.Context) context.Context) error {
	m := e.c.M.ModelByFile(path)
	if m == nil {
		if e.c.Debug {
			e.debug("model %s: not in the manifest: header check only", path)
		}
		if err := models.CheckUnknown(path); err != nil {
			var nr *models.NotRegularError
			switch {
			case errors.Is(err, os.ErrNotExist):
				return &healError{fmt.Errorf("model %s is missing and the manifest does not know it; add a [[models]] entry with file = %q, size and urls to %s so guard can fetch it", path, filepath.Base(path), e.c.ManifestPath)}
			case errors.As(err, &nr):
				return &healError{fmt.Errorf("%v (the manifest does not know this file, so guard cannot fetch it)", nr)}
			}
			return &healError{fmt.Errorf("model %s: %v (the manifest does not know this file, so guard cannot fetch it)", path, err)}
		}
		return nil
	}
	st := e.Models().Usable(m, path) // healthy or not; status tells ok from unverified
	if st.Healthy() {
		if e.c.Debug {
			e.debug("model %s: %s", path, st)
		}
		return nil // the fast path: no signal handler, no goroutine
	}
	e.debug("model %s: %s; healing", path, st)
	if st == verify.NotRegular {
		// Nothing to download: say why now, not from a detached heal.
		return &healError{e.Models().Ensure(ctx, tool, m, path, force)}
	}
	if wait != nil {
		ctx = wait(ctx)
	}
	err := e.healDetached(ctx, tool, jobSpec{kind: healjob.KindModel, name: path, caller: tool}, func(ctx context.Context) error {
		return underSignals(ctx, func(ctx context.Context) error {
			return e.Models().Ensure(ctx, tool, m, path, force)
		})
	})
	if err != nil {
		return &healError{err}
	}
	return nil
}
