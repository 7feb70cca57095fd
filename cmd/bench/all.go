package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/state"
)

// Marker separates the hand-written top of docs/BENCHMARKS.md (the
// summary read from the figures) from the part `all -o` writes.
const Marker = "<!-- Everything below is written by `go run ./cmd/bench all -o docs/BENCHMARKS.md`; edit above this line. -->"

// goBench is a Go benchmark shown as its own section: the in-process
// figures of one package, next to the tables' whole-process ones.
type goBench struct {
	title string
	args  []string // after "go test -run ^$" (after "go test" when they name -run)
}

var goBenches = []goBench{
	{"Model fast path: 2 GB sparse file against 1 KB (goal: within 1.1x), and sha256 throughput",
		[]string{"-bench", "Quick|Sum", "-benchtime", "2000x", "./guard/models/verify/"}},
	{"Binary health check on a healthy call (stamped) and without its stamp",
		[]string{"-bench", "CheckBinary", "-benchtime", "2000x", "./guard/builds/"}},
	{"Manifest: TOML decode against the decoded manifest a shim call reads its tool from (1 and 10,000 tools), and a command reads whole",
		[]string{"-bench", "ParseDefault|LoadDecoded", "-benchtime", "2000x", "./manifest/"}},
	{"Prompt cache: a hit, a miss, the key",
		[]string{"-bench", ".", "-benchtime", "2000x", "./guard/promptcache/"}},
	{"Heal log: guard status's last 10 events of a 1 KB log against a 100 MB one with a full .1",
		[]string{"-bench", "Read", "-benchtime", "200x", "-benchmem", "./guard/heallog/"}},
	{"Supervised run of /bin/true against plain os/exec",
		[]string{"-bench", "RunTrue|Baseline", "-benchtime", "300x", "./guard/runner/"}},
	{"Stall meter on plain and on coloured lines",
		[]string{"-bench", "Meter", "-benchtime", "2000x", "./guard/runner/"}},
	{"Prompt watchdog: one look at whether a quiet tool waits for input, and the time from a question to the end of the call",
		[]string{"-bench", "WaitsForInput|QuestionDetected", "-benchtime", "10x", "./guard/runner/"}},
	{"Healthy call in process: allocations with 1 tool against 10,000 and 1 model against 50 (counted, not timed, so they do not move with the load)",
		[]string{"-run", "DoesNotGrow", "-v", "./guard/"}},
}

// section is one heading of the document and the command that reproduces it.
type section struct {
	title, cmd string
	run        func(w io.Writer) error
}

// sections are the tables and the Go benchmarks in the document's order:
// the start-up table first, since it is what every call pays.
func sections(ctx context.Context, rn *Runner, tables []*Table) []section {
	var out []section
	for _, t := range tables {
		out = append(out, section{t.Title, "go run ./cmd/bench " + t.Name + rn.flags(t), func(w io.Writer) error {
			rep, err := rn.Run(ctx, t)
			if err != nil {
				return err
			}
			return rep.Format(w)
		}})
	}
	for _, b := range goBenches {
		args := append([]string{"test"}, b.args...)
		if !slices.Contains(b.args, "-run") {
			args = append([]string{"test", "-run", "^$"}, b.args...)
		}
		out = append(out, section{b.title, "go " + builds.QuoteArgv(args), func(w io.Writer) error {
			return goTest(ctx, rn.Repo, args, w)
		}})
	}
	return out
}

// flags are the overrides a table ran with, and the size a table moves,
// for the command shown in the document.
func (rn *Runner) flags(t *Table) string {
	var f []string
	k := rn.Knobs
	for _, kv := range []struct {
		name string
		v    int
	}{{"runs", k.Runs}, {"rounds", k.Rounds}, {"warmup", k.Warmup}} {
		if kv.v >= 0 {
			f = append(f, fmt.Sprintf(" -%s %d", kv.name, kv.v))
		}
	}
	if k.Stat != "" {
		f = append(f, " -stat "+k.Stat)
	}
	if t.Bytes > 0 {
		f = append(f, fmt.Sprintf(" -size %d", t.Bytes>>20))
	}
	if rn.Managers && t.Name == "shim" {
		f = append(f, " -install-managers")
	}
	return strings.Join(f, "")
}

// goTest runs a Go benchmark and writes its result lines, without the
// lines that say nothing about the figures (goos, pkg, PASS, ...).
func goTest(ctx context.Context, repo string, args []string, w io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repo
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l == "PASS" || strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "ok\t") {
			continue
		}
		if k, _, ok := strings.Cut(l, ":"); ok && (k == "goos" || k == "goarch" || k == "pkg" || k == "cpu") {
			continue
		}
		fmt.Fprintln(w, strings.TrimRight(l, " \t"))
	}
	if err != nil {
		return fmt.Errorf("go %s: %w", builds.QuoteArgv(args), err)
	}
	return nil
}

// writeAll runs every section into the document's generated part. With
// path, the file's hand-written top (up to Marker) is kept and the rest
// replaced; a file without the marker is refused rather than overwritten.
// A section that fails shows its error and the others still run; the
// error is returned at the end.
func writeAll(ctx context.Context, log io.Writer, secs []section, path string, stdout io.Writer) error {
	top := "# Benchmarks\n\n" + Marker + "\n"
	if path != "" {
		old, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		default:
			i := bytes.Index(old, []byte(Marker))
			if i < 0 {
				return fmt.Errorf("%s has no line %s: not overwriting it", path, Marker)
			}
			top = string(old[:i]) + Marker + "\n"
		}
	}
	var doc bytes.Buffer
	doc.WriteString(top)
	fmt.Fprintf(&doc, "\nAll figures below come from one run of `go run ./cmd/bench all -o docs/BENCHMARKS.md` on %s\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&doc, "(%d cores, %s, load average at the start: %s). The machines are shared:\n", runtime.NumCPU(), runtime.Version(), loadAvg())
	doc.WriteString("ratios inside one run are the figures to trust, not absolute milliseconds.\n")
	var failed []string
	for _, s := range secs {
		fmt.Fprintf(log, "== %s\n", s.title)
		fmt.Fprintf(&doc, "\n## %s\n\n`%s`\n\n```\n", s.title, s.cmd)
		if err := s.run(&doc); err != nil {
			fmt.Fprintf(&doc, "failed: %v\n", err)
			failed = append(failed, s.cmd)
		}
		doc.WriteString("```\n")
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if path == "" {
		if _, err := stdout.Write(doc.Bytes()); err != nil {
			return err
		}
	} else if err := state.Replace(path, doc.Bytes(), 0o644); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d sections failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}
