package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// Heal is `guard heal [NAME...]`: shims, tools (builds and packages),
// models and auth in one pass, or only the named tools and model files. A
// remembered failed download is retried at once. It prints a summary table
// and reports whether everything is healthy now.
func Heal(ctx context.Context, e *guard.Engine, out io.Writer, names []string) bool {
	c := e.Config()
	want := func(name string) bool { return len(names) == 0 || slices.Contains(names, name) }
	var rows [][3]string
	ok := true
	add := func(kind, name string, err error, wasOK bool) {
		switch {
		case err != nil:
			ok = false
			rows = append(rows, [3]string{kind, name, "failed: " + oneLine(err.Error())})
		case wasOK:
			rows = append(rows, [3]string{kind, name, "ok"})
		default:
			rows = append(rows, [3]string{kind, name, "healed"})
		}
	}
	known := map[string]bool{}
	if len(names) == 0 {
		rows = append(rows, [3]string{"shims", tilde(c.Home, c.ShimDir), "ok"})
	}
	// Judge every tool before healing any: one rebuild often brings back
	// several tools, which then count as healed, not as fine all along.
	wasOK := map[string]bool{}
	for name, tool := range c.M.Tools {
		wasOK[name] = e.ToolHealth(tool).OK()
	}
	for _, name := range sortedKeys(c.M.Tools) {
		known[name] = true
		if !want(name) {
			continue
		}
		tool := c.M.Tools[name]
		var err error
		if !wasOK[name] {
			if _, err = e.HealTool(ctx, tool); err != nil {
				e.Say("%s: %s", name, err)
			}
		}
		add("tool", name, err, wasOK[name])
	}
	for _, m := range c.M.Models {
		known[m.File] = true
		if !want(m.File) {
			continue
		}
		path := c.M.ModelsPath(m.File)
		wasOK := e.Models().Check(m, path).Healthy()
		var err error
		if !wasOK {
			err = e.Models().Ensure(ctx, "guard heal", m, path, true)
		}
		add("model", m.File, err, wasOK)
	}
	if len(names) == 0 {
		for _, name := range sortedKeys(c.M.Auth) {
			a := authState(c, c.M.Auth[name])
			state := "ok " + a.Found
			if !a.OK {
				state = "missing (never blocks a call): " + a.Hint
				e.Event(heallog.Event{Level: "warn", Event: "auth.missing", Tool: name, Reason: a.Hint, Result: "missing"})
			}
			rows = append(rows, [3]string{"auth", name, state})
		}
	}
	for _, n := range names {
		if !known[n] {
			ok = false
			rows = append(rows, [3]string{"?", n, "failed: no tool or model of that name in " + c.M.Source})
		}
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r[0], r[1], r[2])
	}
	tw.Flush()
	return ok
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
	data, readErr := os.ReadFile(c.ManifestPath)
	pinned := 0
	var mismatches []error
	for _, m := range c.M.Models {
		var sum, from string
		var err error
		if remote {
			sum, from, err = pinRemote(ctx, e, m, force)
		} else {
			sum, err = pinLocal(e, out, m, force)
		}
		var pm *models.PinMismatchError
		switch {
		case errors.As(err, &pm), remote && err != nil:
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
		fmt.Fprintf(out, "pinned %d models in %s\n", pinned, c.ManifestPath)
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
// file cannot be pinned (said on out).
func pinLocal(e *guard.Engine, out io.Writer, m *manifest.Model, force bool) (string, error) {
	path := e.Config().M.ModelsPath(m.File)
	st := e.Models().Check(m, path)
	if st == verify.OK && !force {
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
	return sum, err
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
