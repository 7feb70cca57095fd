package guard

import (
	"cmp"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/prebuilt"
	"github.com/sandbox-guard/guard/manifest"
)

// A call whose build's outputs are missing or broken, and that no entry of
// the local stash brings back, answers from the recipe's prebuilt (its
// [builds.NAME.prebuilt] table) when the checkout is exactly a release:
// the native build runs detached behind it, and the calls use the native
// build once it is healthy (docs/prebuilt.md). Any reason not to is one
// line, and the heal goes on as before.

// fromPrebuilt is the path of tool's prebuilt for this call, or false
// when the call heals as before.
func (e *Engine) fromPrebuilt(ctx context.Context, tool *manifest.Tool) (string, bool) {
	rec := e.c.M.Build(tool.Build)
	if rec == nil || rec.Prebuilt == nil || tool.Path == "" || len(rec.Steps) == 0 {
		return "", false
	}
	if _, err := os.Stat(rec.Dir); err != nil {
		return "", false // no checkout yet: the build clones it, and it has no release to match
	}
	// The local stash first: an entry of the checkout's own build
	// answers as well, and natively.
	if e.binaries.RestoreNow(ctx, tool.Name, rec, tool.Path) {
		return "", false // healed: healBinary finds it so
	}
	start := time.Now()
	ready, err := e.preparePrebuilt(ctx, rec)
	ev := heallog.Event{Event: heallog.BinaryPrebuilt, Tool: tool.Name, Target: tool.Path, DurationMS: time.Since(start).Milliseconds()}
	if err != nil {
		ev.Result, ev.Reason = "skip", oneLine(err)
		e.Event(ev)
		e.Say("no prebuilt of %s: %s; building", rec.Name, oneLine(err))
		return "", false
	}
	from := "the release " + ready.Tag + " of " + rec.Prebuilt.GitHub
	path, has := ready.Tool(filepath.Base(tool.Path))
	if !ready.Kept {
		// Made ready by this call: logged once, whichever tool asked.
		made := ev
		made.Result, made.Reason, made.Target = "ok", from+" ("+ready.Asset+", sha256 checked)", cmp.Or(path, ready.Dir)
		e.Event(made)
	}
	if !has {
		// The release makes other tools of the recipe, not this one:
		// its calls build it natively, even with native = false.
		ev.Result, ev.Reason = "skip", from+" has no "+filepath.Base(tool.Path)
		e.Event(ev)
		e.Say("no prebuilt of %s: %s has no %s; building", tool.Name, from, filepath.Base(tool.Path))
		return "", false
	}
	if !rec.Prebuilt.BuildsNative() {
		if !ready.Kept {
			e.Say("%s answers from %s (native = false: no build)", tool.Name, from)
		}
		return path, true
	}
	if err := e.buildBehind(tool); err != nil {
		e.Say("%s answers from %s; the native build of %s could not start (%s)", tool.Name, from, rec.Name, oneLine(err))
		return path, true
	}
	e.Say("%s answers from %s while the native build of %s runs in the background; follow it: guard heal --wait %s",
		tool.Name, from, rec.Name, tool.Name)
	return path, true
}

// preparePrebuilt makes rec's prebuilt ready for the checkout as it is
// now, or says why there is none.
func (e *Engine) preparePrebuilt(ctx context.Context, rec *manifest.Build) (prebuilt.Ready, error) {
	key, err := e.StashKey(ctx, rec)
	if err != nil {
		return prebuilt.Ready{}, err
	}
	var env []string
	for _, in := range key.Inputs {
		if in.Name == "env" {
			env = append(env, in.Value)
		}
	}
	commit, why := prebuilt.Clean(key.Source, env)
	if why != "" {
		return prebuilt.Ready{}, errors.New(why)
	}
	tools := e.c.M.ToolFiles(rec.Name)
	if ready, ok := prebuilt.Look(e.c.StateDir, rec.Name, commit, runtime.GOARCH, tools); ok {
		return ready, nil
	}
	return prebuilt.Prepare(ctx, prebuilt.Request{
		Recipe:   rec.Name,
		Source:   rec.Prebuilt,
		Commit:   commit,
		Dir:      rec.Dir,
		Tools:    tools,
		PathEnv:  e.c.PathEnv,
		Env:      e.c.Env,
		StateDir: e.c.StateDir,
		Client: &prebuilt.Client{
			Base:  e.c.Getenv("GITHUB_API_URL"),
			Token: cmp.Or(e.c.Getenv("GITHUB_TOKEN"), e.c.Getenv("GH_TOKEN")),
			Dir:   prebuilt.APIDir(e.c.StateDir),
		},
		Progress: e.c.Stderr,
		Pace:     e.pace,
	})
}

// buildBehind starts tool's heal detached, as a call's heal is started,
// and does not wait for it; one running already is left to run.
func (e *Engine) buildBehind(tool *manifest.Tool) error {
	spec := jobSpec{kind: healjob.KindTool, name: tool.Name, caller: tool.Name}
	rec, err := e.jobRecord(spec)
	if err != nil {
		return err
	}
	j, err := healjob.Claim(e.c.StateDir, rec)
	switch {
	case errors.Is(err, healjob.ErrRunning):
		return nil
	case err != nil:
		return err
	}
	if err := e.jobs.detach(j, spec); err != nil {
		j.Close()
		return err
	}
	return nil
}

// oneLine is err's text on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
