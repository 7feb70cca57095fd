package guard

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/manifest"
)

// ToolHealth is what a look at a tool's real target found, healing nothing.
type ToolHealth struct {
	Path   string // the resolved target; "" when none was found
	Err    error  // why no target was found
	Broken string // why the target found cannot run; "" when it can
	// Fix is the command a person runs when no heal can bring the tool
	// back: "chmod +x PATH" for a manifest path that is there but not
	// executable and that no build recipe makes. "" otherwise.
	Fix string
}

// OK reports whether the tool can run as it is.
func (h ToolHealth) OK() bool { return h.Err == nil && h.Broken == "" }

// ToolHealth resolves tool's real target and checks its binary, healing
// nothing.
func (e *Engine) ToolHealth(tool *manifest.Tool) ToolHealth {
	path, err := e.resolve(tool)
	var ne *resolve.NotExecutableError
	if errors.As(err, &ne) && tool.Build == "" {
		// Not an eviction: a file without the execute bit. A build
		// recipe's output may be one a killed linker left, which the
		// rebuild replaces; anything else only the person can fix.
		return ToolHealth{Err: err, Fix: builds.QuoteArgv([]string{"chmod", "+x", ne.Path})}
	}
	if err != nil {
		return ToolHealth{Err: err}
	}
	return ToolHealth{Path: path, Broken: e.checkBinary(path)}
}

// HealTool is target for a command: the healthy executable behind tool,
// healed first, in this process, when it is missing or broken.
func (e *Engine) HealTool(ctx context.Context, tool *manifest.Tool) (string, error) {
	return e.healTool(ctx, tool, e.checkTool(tool), healHere)
}

// checkTool is ToolHealth with its debug line.
func (e *Engine) checkTool(tool *manifest.Tool) ToolHealth {
	h := e.ToolHealth(tool)
	if h.OK() && e.c.Debug {
		e.debug("%s: resolved to %s; binary ok", tool.Name, h.Path)
	}
	return h
}

// healMode is where a heal runs.
type healMode int

const (
	// healHere heals in this process: a command (guard heal), or the
	// detached heal's own process.
	healHere healMode = iota
	// healAsJob heals as a detached heal (healDetached) that a call waits
	// for within its ctx and that goes on past it.
	healAsJob
)

// healTool resolves the real executable behind tool, given a first look,
// h, at it, and heals it when it is missing or broken: a build recipe
// rebuilds it, a Debian package reinstalls it, as how says.
// A tool that cannot be brought back is a *healError.
func (e *Engine) healTool(ctx context.Context, tool *manifest.Tool, h ToolHealth, how healMode) (string, error) {
	if h.OK() {
		return h.Path, nil
	}
	if h.Fix != "" {
		return "", &execError{fmt.Errorf("%w: run %s", h.Err, h.Fix)}
	}
	why := h.Err
	if why == nil {
		why = errors.New(h.Path + ": " + h.Broken)
	}
	e.debug("%s: %v; healing (build %q, package %q)", tool.Name, why, tool.Build, tool.Package)
	if how == healAsJob && tool.Build != "" {
		// A call may answer from the recipe's prebuilt while the
		// native build runs behind it (docs/prebuilt.md).
		if path, ok := e.fromPrebuilt(ctx, tool); ok {
			return path, nil
		}
	}
	if err := e.healBinary(ctx, tool, why, how); err != nil {
		return "", &healError{err}
	}
	h = e.ToolHealth(tool)
	switch {
	case h.OK():
		return h.Path, nil
	case h.Err != nil:
		return "", &healError{h.Err}
	}
	return "", &healError{errors.New(h.Path + ": still " + h.Broken + " after the heal")}
}

func (e *Engine) resolve(tool *manifest.Tool) (string, error) {
	self, haveSelf := resolve.IDOf(e.c.Self)
	return resolve.Real(resolve.Query{
		Name:     tool.Name,
		Path:     tool.Path,
		PathEnv:  e.c.PathEnv,
		ShimDir:  e.c.ShimDir,
		Self:     self,
		HaveSelf: haveSelf,
	})
}

// checkBinary returns "" when the executable at path is healthy (present,
// executable, every shared library resolvable), else why not.
func (e *Engine) checkBinary(path string) string {
	h := builds.CheckBinary(path, e.c.State().Stamps(), e.c.Getenv("LD_LIBRARY_PATH"))
	if h.OK {
		return ""
	}
	return h.Reason
}

// healBinary brings back tool's executable after resolving or checking it
// failed with why: its build recipe rebuilds it, else its Debian package
// reinstalls it. The heal's own limit (the recipe's timeout, else [budget]
// heal) is the builder's: builds.Builder applies it to the build or the
// install, lock wait included. As a job (healAsJob) a call waits for the
// heal within ctx, and the heal goes on past it.
func (e *Engine) healBinary(ctx context.Context, tool *manifest.Tool, why error, how healMode) error {
	m := e.c.M
	switch {
	case tool.Build != "":
		rec := m.Build(tool.Build)
		if rec == nil {
			return fmt.Errorf("%v\nthe manifest names build %q, which it does not define", why, tool.Build)
		}
		if tool.Path == "" {
			return fmt.Errorf("%v\n[tools.%s] needs a path for build %q to produce", why, tool.Name, tool.Build)
		}
		// A call restores from the stash in its own process: no detached
		// heal to start at low priority and follow (docs/stash.md).
		if how == healAsJob && e.binaries.RestoreNow(ctx, tool.Name, rec, tool.Path) {
			return nil
		}
		return e.healHow(ctx, tool, how, func(ctx context.Context) error {
			return e.binaries.Build(ctx, tool.Name, rec, tool.Path)
		})
	case tool.Package != "":
		return e.healHow(ctx, tool, how, func(ctx context.Context) error {
			return e.binaries.InstallPackages(ctx, tool.Name, []string{tool.Package})
		})
	}
	return fmt.Errorf("%v\nno build recipe or package heals it; install it, or give [tools.%s] a path, build or package in the manifest", why, tool.Name)
}

// healHow runs heal, under signals, as how says: detached for a call
// (healDetached), else in this process.
func (e *Engine) healHow(ctx context.Context, tool *manifest.Tool, how healMode, heal func(context.Context) error) error {
	here := func(ctx context.Context) error { return underSignals(ctx, heal) }
	if how == healAsJob {
		return e.healDetached(ctx, tool.Name, jobSpec{kind: healjob.KindTool, name: tool.Name, caller: tool.Name}, here)
	}
	return here(ctx)
}
