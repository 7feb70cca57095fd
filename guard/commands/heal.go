package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// HealOptions are `guard heal` flags.
type HealOptions struct {
	Names  []string // only these tools and model files; none: everything
	DryRun bool     // say what a heal would do and what it costs; do nothing
	JSON   bool
}

// HealResult is one line of heal's summary.
type HealResult struct {
	Kind   string    `json:"kind"`  // path, shims, shim, link, tool, model, auth, push (a stash_to push not yet made)
	Name   string    `json:"name"`  // what was looked at
	State  HealState `json:"state"` // ok, healed, removed, failed, missing (auth), started (push); would-heal, would-fail (dry run)
	Detail string    `json:"detail,omitempty"`
}

// HealReport is what `guard heal --json` prints; docs/status-json.md documents it.
type HealReport struct {
	OK      bool         `json:"ok"`
	DryRun  bool         `json:"dry_run"`
	Plan    string       `json:"plan"`
	Results []HealResult `json:"results"`
	// Steps are, in a dry run, the steps each planned build would run,
	// its placeholders expanded.
	Steps map[string][][]string `json:"steps,omitempty"`
}

// UsageError is a command given something it cannot take: exit 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Heal is `guard heal [--dry-run] [--json] [NAME...]`: it reads the same
// report as status, plans one job per build recipe, package and model
// (a recipe several tools share runs once), says the plan on stderr, then
// brings back what is wrong or never fetched: shims, tools, models; a
// remembered failed download is retried at once. What no command of
// guard's can fix (the shim folder not first in PATH, guard uninstalled, a
// file in a shim's way) is a failed line saying what to run. It prints a
// summary and reports whether everything is healthy now.
func Heal(ctx context.Context, e *guard.Engine, out io.Writer, o HealOptions) (bool, error) {
	c := e.Config()
	if err := knownNames(c, o.Names); err != nil {
		return false, err
	}
	want := func(name string) bool { return len(o.Names) == 0 || slices.Contains(o.Names, name) }
	r := gather(e)
	jobs := plan(c, r, want)
	if o.DryRun {
		askSources(ctx, e, jobs)
	}
	h := &healer{e: e, dryRun: o.DryRun, ok: true}
	if len(o.Names) == 0 {
		h.shims(r)
	}
	if line := planLine(jobs); line != "" && !o.DryRun {
		e.Say("heal plan: %s", line)
	}
	h.tools(ctx, r, jobs, want)
	h.models(ctx, r, jobs, want)
	if len(o.Names) == 0 {
		h.auth()
		h.pushes(r)
	}
	report := HealReport{OK: h.ok, DryRun: o.DryRun, Plan: planTotal(jobs), Results: h.results}
	if o.DryRun {
		report.Steps = plannedSteps(c, jobs)
	}
	if o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return report.OK || o.DryRun, enc.Encode(report)
	}
	printHeal(out, report)
	return report.OK || o.DryRun, nil
}

// knownNames is a usage error naming the tools and models the manifest
// has when names holds one it does not, before anything is healed.
func knownNames(c *guard.Config, names []string) error {
	var models []string
	for _, m := range c.M.Models {
		models = append(models, m.File)
	}
	for _, n := range names {
		if c.M.Tools[n] == nil && !slices.Contains(models, n) {
			return &UsageError{fmt.Sprintf("heal: no tool or model named %q in %s; its tools: %s; its models: %s",
				n, c.M.Source, orNone(sortedKeys(c.M.Tools)), orNone(models))}
		}
	}
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return printableList(names)
}

// healer runs one heal and collects its summary.
type healer struct {
	e       *guard.Engine
	dryRun  bool
	ok      bool
	results []HealResult
}

func (h *healer) add(kind, name string, state HealState, detail string) {
	if state == HealFailed || state == HealWouldFail {
		h.ok = false
	}
	h.results = append(h.results, HealResult{Kind: kind, Name: name, State: state, Detail: detail})
}

// failed is "failed", or "would-fail" in a dry run.
func (h *healer) failed() HealState {
	if h.dryRun {
		return HealWouldFail
	}
	return HealFailed
}

// shims reports what the per-call repair (run before the heal) could not
// mend, with what to run, and removes the links of tools the manifest no
// longer has.
func (h *healer) shims(r *Report) {
	c := h.e.Config()
	dir := tilde(c.Home, c.ShimDir)
	if !r.ShimDirFirst {
		h.add("path", dir, h.failed(), "not first in PATH; run: "+fixPath(c.ShimDir))
	}
	if !r.Installed {
		h.add("shims", dir, h.failed(), "guard is not installed here; run "+fixInstall)
		return
	}
	fine := true
	for _, s := range r.Shims {
		switch s.State {
		case StateOK, StateStale:
		case StateNotGuard:
			fine = false
			h.add("shim", s.Name, h.failed(), "a file guard did not put there; move it away or run "+fixInstallForce)
		default:
			fine = false
			h.add("shim", s.Name, h.failed(), string(s.State)+"; guard could not mend it (see above)")
		}
	}
	if fine {
		h.add("shims", dir, HealOK, "")
	}
	const why = "no tool of that name in the manifest"
	if h.dryRun {
		for _, name := range staleLinks(c) {
			h.add("link", name, HealWouldHeal, "remove it: "+why)
		}
		return
	}
	removed, err := removeStaleLinks(c)
	for _, name := range removed {
		h.add("link", name, HealRemoved, why)
	}
	if err != nil {
		h.add("link", dir, HealFailed, err.Error())
	}
}

// tools runs each build or package job once and reports every tool it
// brings back; a tool that was fine all along is ok.
func (h *healer) tools(ctx context.Context, r *Report, jobs []*job, want func(string) bool) {
	c := h.e.Config()
	jobOf := map[string]*job{}
	for _, j := range jobs {
		for _, t := range j.tools {
			jobOf[t] = j
		}
	}
	done := map[*job]error{}
	for _, t := range r.Tools {
		if !want(t.Name) {
			continue
		}
		j := jobOf[t.Name]
		switch {
		case t.Fix != "":
			h.add("tool", t.Name, h.failed(), cannotHeal(t.Reason, t.Fix))
			continue
		case j == nil:
			h.add("tool", t.Name, HealOK, "")
			continue
		}
		first := j.tools[0] == t.Name
		if h.dryRun {
			switch {
			case j.kind == jobNone:
				h.add("tool", t.Name, HealWouldFail, "no build recipe or package heals it")
			case first:
				h.add("tool", t.Name, HealWouldHeal, j.what())
			default:
				h.add("tool", t.Name, HealWouldHeal, j.again())
			}
			continue
		}
		tool := c.M.Tools[t.Name]
		if first {
			_, err := h.e.HealTool(ctx, tool)
			if err != nil {
				h.e.Say("%s: %s", t.Name, err)
			}
			done[j] = err
		}
		switch err := done[j]; {
		case h.e.ToolHealth(tool).OK():
			h.add("tool", t.Name, HealHealed, "")
		case err != nil:
			h.add("tool", t.Name, HealFailed, oneLine(err.Error()))
		default:
			now := toolState(h.e, tool)
			h.add("tool", t.Name, HealFailed, "still "+string(now.State)+" after "+j.what()+": "+oneLine(now.Reason))
		}
	}
}

// models heals each model job; a model that was fine is ok.
func (h *healer) models(ctx context.Context, r *Report, jobs []*job, want func(string) bool) {
	c := h.e.Config()
	jobOf := map[string]*job{}
	for _, j := range jobs {
		if j.kind == jobDownload || j.kind == jobVerify {
			jobOf[j.name] = j
		}
	}
	fixes := map[string]ModelState{}
	for _, ms := range r.Models {
		if ms.Fix != "" {
			fixes[ms.File] = ms
		}
	}
	for _, m := range c.M.Models {
		if !want(m.File) {
			continue
		}
		j := jobOf[m.File]
		switch ms, fix := fixes[m.File]; {
		case fix:
			h.add("model", m.File, h.failed(), cannotHeal(ms.Reason, ms.Fix))
		case j == nil:
			h.add("model", m.File, HealOK, "")
		case h.dryRun:
			h.add("model", m.File, HealWouldHeal, j.what())
		default:
			if err := h.e.Models().Ensure(ctx, "guard heal", m, c.M.ModelsPath(m.File), true); err != nil {
				h.add("model", m.File, HealFailed, oneLine(err.Error()))
			} else {
				h.add("model", m.File, HealHealed, "")
			}
		}
	}
}

// pushes starts again, in the background, each stash_to push not yet made
// (docs/registry.md): the heal does not wait for the registry.
func (h *healer) pushes(r *Report) {
	c := h.e.Config()
	for _, b := range r.Builds {
		p := b.Stash.NotPushed
		rec := c.M.Build(b.Name)
		if p == nil || rec == nil {
			continue
		}
		if h.dryRun {
			h.add("push", b.Name, HealWouldHeal, fmt.Sprintf("push the entry %.12s to %s again, in the background", p.Key, rec.StashTo))
			continue
		}
		if _, _, err := h.e.RetryPush(rec); err != nil {
			h.add("push", b.Name, HealFailed, "cannot start the push of the entry not yet pushed: "+oneLine(err.Error()))
			continue
		}
		h.add("push", b.Name, HealStarted, fmt.Sprintf("pushing the entry %.12s to %s again, in the background (log %s)", p.Key, rec.StashTo, tilde(c.Home, h.e.Stash().PushLog(b.Name))))
	}
}

// cannotHeal is the detail of what a heal leaves to the person: why, and
// the Fix status names too.
func cannotHeal(reason, fix string) string { return oneLine(reason) + "; run " + fix }

// auth says which credentials are missing; guard cannot heal them, and
// they never block a call.
func (h *healer) auth() {
	c := h.e.Config()
	for _, name := range sortedKeys(c.M.Auth) {
		a := authState(c, c.M.Auth[name])
		if a.OK {
			h.add("auth", name, HealOK, a.Found)
			continue
		}
		h.add("auth", name, HealMissing, a.missingNote()+": "+a.Hint)
		if !h.dryRun {
			h.e.Event(heallog.Event{Level: "warn", Event: heallog.AuthMissing, Tool: name, Reason: a.Hint, Result: "missing"})
		}
	}
}

// printHeal writes the summary table, and in a dry run the plan's total.
func printHeal(out io.Writer, r HealReport) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, res := range r.Results {
		state := strings.Replace(string(res.State), "would-", "would ", 1)
		if res.Detail != "" {
			state += ": " + res.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res.Kind, printable(res.Name), printable(state))
	}
	tw.Flush()
	if r.DryRun {
		fmt.Fprintf(out, "plan: %s\n", r.Plan)
	}
	for _, name := range sortedKeys(r.Steps) {
		fmt.Fprintf(out, "build %s runs:\n", printable(name))
		for _, step := range r.Steps[name] {
			fmt.Fprintf(out, "  %s\n", printable(builds.QuoteArgv(step)))
		}
	}
}

// Pin is `guard manifest pin`: it hashes every model that passes size and
// header and writes the sums into the user manifest, keeping its comments
// and order. With no user manifest it prints the lines to paste. A model
// that already has a pin is verified against it, never re-pinned: a file
// whose sum differs is reported (both sums) and makes Pin fail after the
// others are written, unless force pins every file as it is. remote takes
// each sum from what the model's urls declare (X-Linked-Etag), without
// downloading or hashing anything.
func Pin(ctx context.Context, e *guard.Engine, out io.Writer, force, remote bool) error {
	c := e.Config()
	data, readErr := manifest.ReadFile(c.ManifestPath)
	pinned := 0
	var mismatches []error
	for _, m := range c.M.Models {
		var sum, from string
		var err error
		if remote {
			sum, from, err = pinRemote(ctx, e, m, force)
		} else {
			sum, err = pinLocal(ctx, e, out, m, force)
		}
		var pm *models.PinMismatchError
		var dm *DeclaredMismatchError
		switch {
		case errors.As(err, &pm), errors.As(err, &dm), remote && err != nil:
			mismatches = append(mismatches, err)
			continue
		case err != nil:
			return err
		case sum == "":
			continue // said why already
		case sum == strings.ToLower(m.SHA256):
			fmt.Fprintf(out, "%s: already pinned and verified%s\n", m.File, from)
			continue
		}
		if readErr != nil {
			fmt.Fprintf(out, "%s: sha256 = %q\n", m.File, sum)
			continue
		}
		next, err := manifest.PinSHA256(data, m.File, sum)
		if err != nil {
			return fmt.Errorf("pin %s: %w", m.File, err)
		}
		data = next
		pinned++
		fmt.Fprintf(out, "%s: sha256 = %s%s\n", m.File, sum, from)
	}
	if readErr != nil {
		fmt.Fprintf(out, "no user manifest at %s: paste the lines above into its [[models]] entries (guard install writes one)\n", c.ManifestPath)
		return unpinned(mismatches)
	}
	if pinned > 0 {
		if _, err := manifest.Parse(c.ManifestPath, data, c.Home); err != nil {
			return fmt.Errorf("pinned manifest does not validate, left unchanged: %w", err)
		}
		if err := state.WriteAtomic(c.ManifestPath, data, 0o644); err != nil {
			return fmt.Errorf("write manifest: %w", err)
		}
		fmt.Fprintf(out, "pinned %s in %s\n", units.Count(pinned, "model", "models"), c.ManifestPath)
	}
	return unpinned(mismatches)
}

// UnpinnedError is the models `guard manifest pin` could not pin (a file
// or a declaration that contradicts the pin, no declared sum): something
// to fix, not guard's own failure.
type UnpinnedError struct{ Errs []error }

func (e *UnpinnedError) Error() string   { return errors.Join(e.Errs...).Error() }
func (e *UnpinnedError) Unwrap() []error { return e.Errs }

func unpinned(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return &UnpinnedError{errs}
}

// pinLocal hashes the model file on disk: the sum to pin, or "" when the
// file cannot be pinned (said on out). A file that was never checked
// against anything (unverified: no pin, no declared sum when it came) is
// compared with what its sources declare first: one that declares another
// sha256 refuses the pin (a *DeclaredMismatchError) unless force, and
// with none declaring it the pin says it trusts the file as it is.
func pinLocal(ctx context.Context, e *guard.Engine, out io.Writer, m *manifest.Model, force bool) (string, error) {
	path := e.Config().M.ModelsPath(m.File)
	st := e.Models().Check(m, path)
	// OK without a pin is a file checked against a declared sum: it still
	// needs its pin written.
	if st == verify.OK && m.SHA256 != "" && !force {
		return strings.ToLower(m.SHA256), nil
	}
	if !st.Hashable() && st != verify.HashMismatch {
		fmt.Fprintf(out, "%s: %s, not pinned (guard heal %s first)\n", m.File, st, m.File)
		return "", nil
	}
	sum, err := e.Models().Pin(m, path, force)
	var pm *models.PinMismatchError
	if err != nil && !errors.As(err, &pm) {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	if err == nil && st == verify.Unverified && m.SHA256 == "" {
		return sum, checkDeclared(ctx, e, out, m, sum, force)
	}
	return sum, err
}

// checkDeclared compares sum, the sha256 of an unverified model file, with
// what m's sources declare (a HEAD each, nothing downloaded).
func checkDeclared(ctx context.Context, e *guard.Engine, out io.Writer, m *manifest.Model, sum string, force bool) error {
	d, err := e.Models().Declared(ctx, m)
	switch {
	case err == nil && d.SHA256 == sum:
		fmt.Fprintf(out, "%s: unverified until now: its sha256 matches what %s declares\n", m.File, d.URL)
	case err == nil && !force:
		return &DeclaredMismatchError{File: m.File, URL: d.URL, Declared: d.SHA256, Got: sum}
	case err == nil:
		fmt.Fprintf(out, "%s: unverified, and %s declares another sha256 (%s): pinned as the file is (--force)\n", m.File, d.URL, d.SHA256)
	default:
		fmt.Fprintf(out, "%s: unverified: no source declares its sha256, so the pin trusts the file as it is on disk; check the sum against the model's publisher\n", m.File)
	}
	return nil
}

// DeclaredMismatchError is an unverified model file whose sha256 is not
// the one a source of the model declares: `guard manifest pin` does not
// pin it.
type DeclaredMismatchError struct {
	File, URL, Declared, Got string
}

func (e *DeclaredMismatchError) Error() string {
	return fmt.Sprintf("%s: the file's sha256 is %s, but %s declares %s (X-Linked-Etag): the file on disk was never verified and is not the one its source names; not pinned. `guard manifest pin --remote` pins the declared sum (then `guard heal %s` brings that file), or `guard manifest pin --force` pins the file as it is",
		e.File, e.Got, e.URL, e.Declared, e.File)
}

// pinRemote asks the model's urls what sha256 they declare. A pin the
// declaration contradicts is kept unless force. from says who declared it,
// for the line printed.
func pinRemote(ctx context.Context, e *guard.Engine, m *manifest.Model, force bool) (sum, from string, err error) {
	d, err := e.Models().Declared(ctx, m)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", m.File, err)
	}
	from = " (declared by " + d.URL + ")"
	if pin := strings.ToLower(m.SHA256); pin != "" && pin != d.SHA256 && !force {
		return "", "", &fetch.MismatchError{URL: d.URL, What: "sha256", Want: pin, Got: d.SHA256, Declared: "X-Linked-Etag"}
	}
	return d.SHA256, from, nil
}
