package commands

import (
	"github.com/sandbox-guard/guard/guard/openclaw"
	"github.com/sandbox-guard/guard/guard/stash"

	"bytes"
	"fmt"
	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/units"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// printer writes the status report for a person: one screen, grouped,
// aligned, coloured on a terminal, paths under HOME written as ~/.
type printer struct {
	colour     bool
	home       string
	showEvents bool
}

const (
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

func (p *printer) paint(code, s string) string {
	if !p.colour {
		return s
	}
	// Every painted cell, even an empty one, carries the same nine bytes of
	// escapes, so tabwriter still aligns a column that is painted throughout.
	return code + s + reset
}

// mark colours a state word: green when fine, red when it needs healing.
func (p *printer) mark(ok bool, s string) string {
	if ok {
		return p.paint(green, s)
	}
	return p.paint(red, s)
}

// tilde writes a path under HOME as ~/..., which is shorter and the same
// on every machine, as a printable cell.
func (p *printer) tilde(path string) string { return printable(tilde(p.home, path)) }

func tilde(home, path string) string {
	if home == "" || home == "/" {
		return path
	}
	if path == home {
		return "~"
	}
	if rest, ok := strings.CutPrefix(path, home+"/"); ok {
		return "~/" + rest
	}
	return path
}

// tildeAll applies tilde to every path-looking word of a message's first
// line, and makes it printable.
func (p *printer) tildeAll(s string) string {
	s = oneLine(s)
	if p.home != "" && p.home != "/" {
		s = strings.ReplaceAll(s, p.home+"/", "~/")
	}
	return printable(s)
}

// print writes r as the sections below, in this order, through one
// tabwriter: a section's title (a line with no tab) ends the columns of
// the section before it.
func (p *printer) print(out io.Writer, r *Report) {
	var buf bytes.Buffer
	defer func() { writeTrimmed(out, buf.Bytes()) }()
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	p.headline(tw, r)
	fmt.Fprintf(tw, "manifest: %s\n", p.tilde(r.Manifest))
	for _, section := range []func(io.Writer, *Report){
		p.shims, p.openclaw, p.tools, p.builds, p.packages, p.models, p.auth, p.healing, p.cache, p.events,
	} {
		section(tw, r)
	}
	tw.Flush()
}

// section starts a section titled title.
func (p *printer) section(w io.Writer, title string) {
	fmt.Fprintf(w, "\n%s\n", p.paint(bold, title))
}

// shims is the shim folder, whether it is first in PATH, and each entry.
func (p *printer) shims(tw io.Writer, r *Report) {
	first := "yes"
	if !r.ShimDirFirst {
		first = "no; run: " + fixPath(r.ShimDir)
	}
	p.section(tw, "shims ("+p.tilde(r.ShimDir)+", first in PATH: "+p.mark(r.ShimDirFirst, first)+")")
	for _, s := range r.Shims {
		what := "-> guard"
		switch {
		case s.Name == "guard":
			what = "guard's own copy"
		case s.State == StateStale:
			what = "-> guard (no tool of that name in the manifest; guard heal removes it)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", printable(s.Name), p.mark(s.State == StateOK || s.State == StateStale, string(s.State)), what)
	}
}

// openclaw is whether OpenClaw's exec tool finds the shims first, when
// OpenClaw's config was found.
func (p *printer) openclaw(tw io.Writer, r *Report) {
	oc := r.OpenClaw
	if !oc.Found {
		return
	}
	p.section(tw, "openclaw ("+p.tilde(oc.Config)+")")
	switch {
	case oc.Protected:
		fmt.Fprintf(tw, "  exec\t%s\t%s in %s\n", p.mark(true, "protected"), p.tilde(r.ShimDir), openclaw.Setting)
	case oc.Declined:
		fmt.Fprintf(tw, "  exec\t%s\tleft alone (guard install --no-openclaw); %s\n", p.paint(yellow, "not protected"), p.tildeAll(oc.Reason))
	default:
		fmt.Fprintf(tw, "  exec\t%s\t%s; run: %s\n", p.mark(false, "not protected"), p.tildeAll(oc.Reason), p.tildeAll(oc.Fix))
	}
}

// tools is each tool: its state, its target (or why it has none) and
// what heals it.
func (p *printer) tools(tw io.Writer, r *Report) {
	p.section(tw, "tools")
	for _, t := range r.Tools {
		detail := p.tilde(t.Target)
		if libs := libraries(t); libs != "" {
			detail += " (" + libs + ")"
		}
		if t.Reason != "" {
			detail = p.tildeAll(t.Reason)
		}
		heal := ""
		if t.Build != "" {
			heal = "build " + printable(t.Build)
		} else if t.Package != "" {
			heal = "package " + printable(t.Package)
		}
		state := p.mark(t.State == StateOK, string(t.State))
		if t.State == StateNotBuilt {
			state = p.paint(yellow, string(t.State))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", printable(t.Name), state, detail, heal)
	}
}

// builds is each build recipe, its stash entries and the stashes it reads
// and pushes to.
func (p *printer) builds(tw io.Writer, r *Report) {
	if len(r.Builds) == 0 {
		return
	}
	p.section(tw, "builds")
	for _, b := range r.Builds {
		src := sourceText(b)
		stashed := "" // a recipe with no stash entry says nothing of it
		if b.Stash.Entries > 0 {
			stashed = stashText(b.Stash) + "\t"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%slog %s\n", printable(b.Name), p.tilde(b.Dir), p.mark(b.DirExists, src), lastBuilt(b), stashed, p.tilde(b.Log))
		for _, src := range b.Stash.Sources {
			fmt.Fprintf(tw, "    stash_from\t%s\t%s\n", printable(src.URL), p.mark(src.Result != stash.AnswerFailed, answerText(src)))
		}
		if b.Stash.PushTo != "" {
			fmt.Fprintf(tw, "    stash_to\t%s\t%s\n", printable(b.Stash.PushTo), printable(pushText(b.Stash)))
		}
		if pb := b.Prebuilt; pb != nil {
			fmt.Fprintf(tw, "    prebuilt\t%s\t%s\n", printable(pb.GitHub), p.tildeAll(prebuiltLine(pb)))
		}
	}
}

// packages is each system package a tool needs, present or not.
func (p *printer) packages(tw io.Writer, r *Report) {
	if len(r.Packages) == 0 {
		return
	}
	p.section(tw, "packages")
	for _, pk := range r.Packages {
		state := p.paint(green, "present")
		if !pk.Present {
			state = p.paint(yellow, "missing (installed when a heal needs it)")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", printable(pk.Command), printable(pk.Package), state)
	}
}

// models is each model file, under their common folder when they share
// one.
func (p *printer) models(tw io.Writer, r *Report) {
	if len(r.Models) == 0 {
		return
	}
	dir := modelsDir(r.Models)
	if dir != "" {
		p.section(tw, "models ("+p.tilde(dir)+")")
	} else {
		p.section(tw, "models")
	}
	for _, m := range r.Models {
		name := printable(m.File)
		if dir == "" {
			name = p.tilde(m.Path)
		}
		state := p.mark(modelUsable(m.State), string(m.State))
		if m.State == StateUnverified || m.State == StateNotFetched {
			state = p.paint(yellow, string(m.State))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", name, printable(m.Role), state, p.modelDetail(m))
	}
}

// auth is each credential a tool needs: where it was found, or how to
// give it.
func (p *printer) auth(tw io.Writer, r *Report) {
	if len(r.Auth) == 0 {
		return
	}
	p.section(tw, "auth")
	for _, a := range r.Auth {
		state := p.paint(green, "ok") + " " + p.tilde(a.Found)
		if !a.OK {
			note := " (" + a.missingNote() + ")"
			if a.For != "" {
				note = ", " + a.missingNote()
			}
			state = p.paint(yellow, "missing") + p.tildeAll(note+": "+a.Hint)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", printable(a.Name), state)
	}
}

// healing is each heal going on in the background: where it stands, its
// process and its log.
func (p *printer) healing(tw io.Writer, r *Report) {
	if len(r.Healing) == 0 {
		return
	}
	p.section(tw, "healing in the background")
	for _, h := range r.Healing {
		where := p.paint(yellow, healjob.Record{Percent: h.Percent, LeftMS: h.LeftMS, LeftEstimated: h.LeftEstimated}.Where())
		if c := condition(h); c != "" {
			where += ", " + p.mark(false, c)
		}
		fmt.Fprintf(tw, "  %s\t%s\tpid %d since %s\t%s\tlog %s\n", printable(h.What+fleetPart(h.Phase)), where, h.PID, when(h.Started), printable(h.Wait), p.tilde(h.Log))
	}
}

// fleetPart is what a heal's phase says of the fleet's lease
// (docs/fleet-lease.md): held here, or waited on, with who builds.
func fleetPart(phase string) string {
	switch {
	case strings.HasPrefix(phase, lease.ForTheFleet):
		return " (" + lease.ForTheFleet + ": the lease is held here)"
	case lease.WaitingPhase(phase):
		return " (" + phase + ": waiting on its lease)"
	}
	return ""
}

// cache is the prompt cache's figures.
func (p *printer) cache(tw io.Writer, r *Report) {
	p.section(tw, "cache")
	fmt.Fprintf(tw, "  %s, %s, %s, %s, %.1fs saved\n", units.Count(r.Cache.Entries, "entry", "entries"), humanBytes(r.Cache.Bytes), units.Count(r.Cache.Hits, "hit", "hits"), units.Count(r.Cache.Misses, "miss", "misses"), r.Cache.SavedSeconds)
}

// events is the last heal events, unless --events 0 asked for none.
func (p *printer) events(tw io.Writer, r *Report) {
	if !p.showEvents {
		return
	}
	p.section(tw, "heal events ("+p.tilde(r.LogPath)+")")
	if len(r.Events) == 0 {
		fmt.Fprintln(tw, "  none")
	}
	for _, e := range r.Events {
		dur := ""
		if e.DurationMS > 0 {
			dur = (time.Duration(e.DurationMS) * time.Millisecond).Round(time.Millisecond).String()
		}
		result := p.mark(e.Result == "" || e.Result == "ok", printable(e.Result))
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", when(e.TS), printable(e.Event), printable(eventTool(e)), p.tildeAll(firstOf(e.Target, e.Reason)), result, dur)
	}
	if r.OtherEvents > 0 {
		fmt.Fprintf(tw, "  (%s of other installs in this log left out)\n", units.Count(r.OtherEvents, "event", "events"))
	}
	if r.OlderEventsNotRead {
		fmt.Fprintf(tw, "  (older events not read: status reads the last %d MiB of the log)\n", statusLogScan>>20)
	}
}

// headline is the report's first lines: "healthy", or one line for each
// command that fixes something, naming what it fixes; then what was never
// fetched here, which a call fetches when it needs it.
func (p *printer) headline(w io.Writer, r *Report) {
	problems := r.problems()
	if len(problems) == 0 {
		fmt.Fprintf(w, "guard: %s\n", p.mark(true, "healthy"))
	}
	var fixes []string
	byFix := map[string][]string{}
	for _, pr := range problems {
		if byFix[pr.Fix] == nil {
			fixes = append(fixes, pr.Fix)
		}
		byFix[pr.Fix] = append(byFix[pr.Fix], pr.What)
	}
	for _, fix := range fixes {
		items := strings.Join(byFix[fix], ", ")
		if r.healingFix(fix) {
			fmt.Fprintf(w, "guard: %s: %s; run %s\n", p.mark(false, "healing in the background"), items, printable(fix))
			continue
		}
		switch fix {
		case fixHeal:
			fmt.Fprintf(w, "guard: %s: %s; run guard heal\n", p.mark(false, "needs healing"), items)
		case fixInstall:
			fmt.Fprintf(w, "guard: %s: %s; run guard install\n", p.mark(false, "not installed"), p.tilde(r.ShimDir))
		case fixInstallForce:
			fmt.Fprintf(w, "guard: %s: %s (a file guard did not put there); run guard install --force\n", p.mark(false, "in the way"), items)
		case fixPath(r.ShimDir):
			fmt.Fprintf(w, "guard: %s: %s; run: %s\n", p.mark(false, "not first in PATH"), p.tilde(r.ShimDir), fix)
		default: // a tool's or model's Fix: what only the person can do
			fmt.Fprintf(w, "guard: %s: %s; run: %s\n", p.mark(false, "guard cannot heal"), items, printable(fix))
		}
	}
	if todo := r.notFetched(); len(todo) > 0 {
		fmt.Fprintf(w, "guard: %s: %s; a call fetches what it needs, or see guard heal --dry-run\n",
			p.paint(yellow, "not fetched yet"), strings.Join(todo, ", "))
	}
}

// writeTrimmed copies text to out without what tabwriter leaves after a
// row's last non-empty cell: spaces, and empty painted cells.
func writeTrimmed(out io.Writer, text []byte) {
	for line := range bytes.Lines(text) {
		line = bytes.TrimRight(line, "\n")
		for {
			line = bytes.TrimRight(line, " ")
			if !emptyPaintAtEnd(line) {
				break
			}
			line = line[:len(line)-len(green+reset)]
		}
		out.Write(append(line, '\n'))
	}
}

// emptyPaintAtEnd reports whether line ends with a colour code directly
// followed by the reset, as paint writes an empty cell.
func emptyPaintAtEnd(line []byte) bool {
	n := len(green + reset)
	if len(line) < n || !bytes.HasSuffix(line, []byte(reset)) {
		return false
	}
	code := line[len(line)-n : len(line)-len(reset)]
	return bytes.HasPrefix(code, []byte("\x1b[")) && code[len(code)-1] == 'm'
}

// when writes an event's time syslog-style, with the date: the log
// outlives sessions, and one width keeps the columns still.
func when(ts time.Time) string { return ts.Local().Format("Jan 02 15:04:05") }

func (p *printer) modelDetail(m ModelState) string {
	var s string
	switch {
	case modelUsable(m.State) || m.State == StateStale || m.State == StateHashMismatch:
		s = humanBytes(m.Size)
	case m.State == StateNotFetched:
		s = "download " + humanBytes(m.DownloadBytes)
	case m.State == StateMissing:
		s = "needs " + humanBytes(m.DownloadBytes)
	case m.State == StateNotRegular:
		s = p.tildeAll(m.Reason)
	default:
		s = humanBytes(m.OnDisk) + " of " + humanBytes(m.Size)
	}
	if m.SpeedSamples > 0 {
		s += fmt.Sprintf("  %g tok/s declared, %.1f measured (%s)", m.DeclaredTPS, m.MeasuredTPS, units.Count(m.SpeedSamples, "call", "calls"))
	}
	if !m.RetryAfter.IsZero() {
		s += fmt.Sprintf("; last heal failed (%s), retried after %s or by guard heal", p.tildeAll(m.Reason), m.RetryAfter.Local().Format("15:04:05"))
	}
	return s
}

// libraries says how a healthy target links: "static", "1 library", "3
// libraries" (every one resolved, or the tool would be broken).
func libraries(t ToolState) string {
	switch {
	case t.Static:
		return "static"
	case len(t.Libraries) > 0:
		return units.Count(len(t.Libraries), "library", "libraries")
	}
	return ""
}

// modelsDir is the folder every model lives in, or "" when they differ.
func modelsDir(ms []ModelState) string {
	dir := filepath.Dir(ms[0].Path)
	for _, m := range ms[1:] {
		if filepath.Dir(m.Path) != dir {
			return ""
		}
	}
	return dir
}

// answerText says what a stash source last answered, and when.
func answerText(s SourceState) string {
	if s.At.IsZero() {
		return string(s.Result)
	}
	t := string(s.Result) + " " + time.Since(s.At).Round(time.Second).String() + " ago"
	if s.Reason != "" {
		t += ": " + s.Reason
	}
	return t
}

// pushText is the last line of the last background push, after the
// entry not yet pushed, when one waits.
func pushText(s StashState) string {
	last := "no push yet"
	if s.LastPush != "" {
		last = "last push: " + strings.TrimPrefix(s.LastPush, "guard: ")
	}
	if p := s.NotPushed; p != nil {
		return fmt.Sprintf("entry %.12s not yet pushed (waiting %s, %s); %s", p.Key, time.Since(p.Since).Round(time.Second), units.Count(p.Tries, "try", "tries"), last)
	}
	return last
}

// stashText says what a recipe's stash holds and whether a heal would
// restore from it now.
func stashText(s StashState) string {
	if s.Entries == 0 {
		return "stash empty"
	}
	n := units.Count(s.Entries, "entry", "entries")
	if s.Matches {
		return "stash " + n + ", " + humanBytes(s.Bytes) + "; one matches now (a heal restores it)"
	}
	return "stash " + n + ", " + humanBytes(s.Bytes) + "; none matches now (a heal builds)"
}

// humanBytes writes n in B, KiB, MiB or GiB with one decimal: the one unit
// family guard speaks in (units.Bytes).
func humanBytes(n int64) string { return units.Bytes(n) }

// eventTool is an event's tool, and "detached" for a heal a call started
// and left running.
func eventTool(e heallog.Record) string {
	if e.Detached {
		return e.Tool + " (detached)"
	}
	return e.Tool
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

// prebuiltLine says what a recipe's release build is here: the release
// ready for the checkout (it answers the calls while the native build is
// missing, but for the tools it lacks), or none yet (docs/prebuilt.md).
func prebuiltLine(pb *PrebuiltState) string {
	native := "; the native build follows it"
	if !pb.Native {
		native = "; native = false: nothing is built"
	}
	if pb.Ready == "" {
		return "none ready for this checkout (a call makes one ready when the checkout is exactly a release)" + native
	}
	if len(pb.Lacks) > 0 {
		lacks := "; it has no " + strings.Join(pb.Lacks, " nor ") + ": calls of it build it natively"
		if pb.Native {
			native = lacks + native
		} else {
			native = lacks + " (native = false: nothing else is built)"
		}
	}
	return "the release " + pb.Ready + " ready in " + pb.Dir + ": it answers while the native build is missing" + native
}
