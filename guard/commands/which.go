package commands

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/prebuilt"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// Which is `guard which NAME`: for a tool (a name the manifest does not
// know is looked up as a call of it would be) its shim, real target, the
// state of its binary and every file the loader maps for it, its build or
// package, and for a llama tool the models; for a model file its path,
// state, size, pin and sources. It reports whether what it shows is
// healthy, by status's rules (never built or fetched is not a problem).
func Which(e *guard.Engine, out io.Writer, name string) bool {
	c := e.Config()
	p := &printer{home: c.Home}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	defer func() {
		tw.Flush()
		writeTrimmed(out, buf.Bytes())
	}()
	row := func(key, value, detail string) {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", key, value, detail)
	}
	if m := c.M.ModelByFile(name); m != nil && m.File == name {
		return whichModel(e, p, tw, row, m)
	}
	tool := c.M.Tools[name]
	if tool == nil {
		tool = &manifest.Tool{Name: name}
		fmt.Fprintln(tw, "tool "+printable(name)+" (not in the manifest: run as it is)")
	} else {
		fmt.Fprintln(tw, "tool "+printable(name))
		row("shim", p.tilde(filepath.Join(c.ShimDir, name))+" -> "+install.GuardName, string(shimState(c.ShimDir, name).State))
	}
	t := toolState(e, tool)
	switch {
	case t.Target != "" && tool.Path != "":
		row("target", p.tilde(t.Target), "the manifest's path")
	case t.Target != "":
		row("target", p.tilde(t.Target), "found on PATH, after the shim folder")
	}
	if t.State != StateOK {
		row("binary", string(t.State), p.tildeAll(t.Reason))
	} else {
		found, missing := builds.Libraries(t.Target, c.Getenv("LD_LIBRARY_PATH"))
		switch {
		case t.Static:
			row("binary", "ok", "static")
		case found == nil && missing == nil:
			row("binary", "ok", "a script or non-ELF executable")
		default:
			row("binary", "ok", "dynamic, "+units.Count(len(found), "file", "files")+" loaded")
		}
		for _, f := range found {
			row("loads", p.tilde(f), "")
		}
	}
	if rec := c.M.Builds[tool.Build]; rec != nil {
		b := buildState(e, rec)
		row("build", printable(b.Name), p.tilde(b.Dir)+"  "+sourceText(b)+"; "+lastBuilt(b)+"; log "+p.tilde(b.Log))
		for i, step := range rec.ExpandedSteps() {
			row("step", strconv.Itoa(i+1), printable(builds.QuoteArgv(step)))
		}
		row("stash", strings.TrimPrefix(stashText(b.Stash), "stash "), "")
		for _, src := range b.Stash.Sources {
			row("stash_from", printable(src.URL), printable(answerText(src)))
		}
		if b.Stash.PushTo != "" {
			row("stash_to", printable(b.Stash.PushTo), printable(pushText(b.Stash)))
		}
		if rec.Prebuilt != nil {
			row("prebuilt", printable(rec.Prebuilt.GitHub), p.tildeAll(prebuiltText(e, rec, tool, t.State == StateOK)))
		}
	}
	if tool.Package != "" {
		row("package", printable(tool.Package), "installed by a heal when the binary is missing")
	}
	healingRows(c, row, name)
	if name == shims.LlamaCompletion || name == shims.LlamaSimple {
		for _, m := range c.M.Models {
			row("model", printable(m.File), string(modelState(e, m).State))
		}
	}
	return t.State == StateOK || t.State == StateNotBuilt
}

func whichModel(e *guard.Engine, p *printer, tw io.Writer, row func(key, value, detail string), m *manifest.Model) bool {
	st := modelState(e, m)
	fmt.Fprintln(tw, "model "+printable(m.File))
	row("path", p.tilde(st.Path), "")
	row("state", string(st.State), p.modelDetail(st))
	if m.SHA256 == "" {
		row("sha256", "not pinned", "guard manifest pin records it")
	} else {
		row("sha256", m.SHA256, "pinned")
	}
	if m.Role != "" {
		row("role", printable(m.Role), "")
	}
	for _, u := range m.URLs {
		row("url", printable(u), "")
	}
	healingRows(e.Config(), row, m.File)
	return modelUsable(st.State) || st.State == StateNotFetched
}

// healingRows shows the heals running in the background for name: how
// far, and the command that waits for it.
func healingRows(c *guard.Config, row func(key, value, detail string), name string) {
	for _, h := range healing(c) {
		if slices.Contains(h.Names, name) {
			where := healjob.Record{Percent: h.Percent, LeftMS: h.LeftMS, LeftEstimated: h.LeftEstimated}.Where()
			if c := condition(h); c != "" {
				where += ", " + c
			}
			row("healing", printable(h.What), fmt.Sprintf("in the background, pid %d: %s; %s", h.PID, where, printable(h.Wait)))
		}
	}
}

// prebuiltText says which build answers tool's calls: the native one when
// it is healthy, else the prebuilt ready for the checkout's HEAD, if any
// (docs/prebuilt.md).
func prebuiltText(e *guard.Engine, rec *manifest.Build, tool *manifest.Tool, nativeOK bool) string {
	c := e.Config()
	native := ""
	if !rec.Prebuilt.BuildsNative() {
		native = " (native = false: nothing is built)"
	}
	if nativeOK {
		return "the native build answers; a release build answers only while it is missing" + native
	}
	if tool.Path != "" {
		name := filepath.Base(tool.Path)
		if ready, ok := prebuilt.LookCheckout(context.Background(), c.StateDir, rec.Name, rec.Dir, c.PathEnv, []string{name}); ok {
			if p, has := ready.Tool(name); has {
				return "the release " + ready.Tag + " answers, from " + p + native
			}
			return "the release " + ready.Tag + " has no " + name + ": its calls build it natively"
		}
	}
	return "none ready for this checkout: a call makes one ready when the checkout is exactly a release" + native
}
