// Command bench is guard's benchmark harness: every whole-process
// benchmark of guard as a table of rows timed side by side, and the
// generator of docs/BENCHMARKS.md. Run it from inside the repository:
//
//	go run ./cmd/bench shim       # start-up: guard against a direct exec, a bash shim, Go floor shims, other managers; and as guard's files grow
//	go run ./cmd/bench download   # guard's model download against curl and aria2c over loopback
//	go run ./cmd/bench download-capped   # the same behind a 20 MB/s-a-connection cap and a 50 ms first byte
//	go run ./cmd/bench output     # a tool printing -size MB to a pipe through guard against a bash shim
//	go run ./cmd/bench rebuild    # a cold rebuild of the CMake fixture through guard against bare cmake
//	go run ./cmd/bench prewarm    # a fresh shell to its first llama answer, with and without install --prewarm
//	go run ./cmd/bench all -install-managers -o docs/BENCHMARKS.md   # every table and Go benchmark, into the document
//
// A row is one command (Row); a table (Table) samples its rows interleaved:
// in each round every row runs, in a new random order, its warm-up and its
// share of samples, so a change of load on a shared machine hits every row
// alike. Each sample's wall time is measured around the child's start and
// wait, and its CPU time, maximum RSS and page faults come from the
// child's rusage, read by a small helper that starts it (cmd/bench/spawn:
// Linux counts a child's RSS from its parent's memory at exec, so no row
// reads below that helper's own, about 2 MB). The report gives median,
// mean and 90th percentile, CPU, RSS, faults (unlike times, they do not
// move with the load of a shared machine), the ratio to each anchor row
// and every goal's verdict. Goals missed are figures, not failures: the
// exit status is 0 unless a benchmark could not run.
//
// guard and the floor shims are built as a release is
// (CGO_ENABLED=0 -trimpath -ldflags "-s -w" -tags urfave_cli_no_docs) once
// a run, and each is timed from one file: byte-identical copies of one
// binary in two files can time 1.25x apart (their page-cache placement),
// so every sandbox's $SHIM_DIR/guard is a hard link to the one build and
// every tool a link to that. Everything runs in a temp HOME with every
// GUARD_* path inside it; nothing touches the real HOME, ~/.shim or
// /tmp/selfheal.log.
//
// Knobs (after the command): -runs, -rounds, -warmup (each table has its
// defaults), -stat median|mean|cpu (what ratios and goals compare), -keep
// (keep the temp folder: sandboxes, binaries, each row's last stderr),
// -guard FILE (time a guard built elsewhere: the shim table's scaling rows
// with an older build show what a change did), -baseline FILE (shim: time
// an older build's exec and supervised paths and this build's, installed
// alike, in one run: the before-* and after-* rows), -size MB (download, output),
// -install-managers (shim: install the other shim managers that are not on
// PATH into the temp folder, mise with npm, asdf and aqua-proxy with go
// install; tests never do):
//
//	go run ./cmd/bench shim -runs 40 -rounds 10 -stat cpu -keep
//
// To add a row, add it to its table (shim.go, download.go, output.go, rebuild.go);
// to add a table, write one like them and list it in tables below.
//
// To see which package initialisers guard's start-up pays for:
//
//	go build -o /tmp/guard ./cmd/guard && GODEBUG=inittrace=1 /tmp/guard --version 2>&1 >/dev/null | sort -k5 -nr | head
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// tables are every table, by subcommand.
// A sizeMB of -1 takes each table's own: the download's model 256 MB, the
// output table's 200 MB (issue 14's figure).
func tables(sizeMB int) []*Table {
	return []*Table{shimTable(FullScale), downloadTable(sizeOr(sizeMB, 256)), cappedTable(sizeOr(sizeMB, 512)), outputTable(sizeOr(sizeMB, 200)), rebuildTable(), prewarmTable()}
}

func sizeOr(n, def int) int {
	if n < 0 {
		return def
	}
	return n
}

const usage = `usage: go run ./cmd/bench COMMAND [flags]

commands:
  shim       start-up of a call through guard against a direct exec, floor shims and other managers' shims,
             and as the manifest, the prompt cache and the heal log grow
  download   guard's model download against curl and aria2c over loopback
  download-capped
             the same behind a server capping each connection at 20 MB/s after a 50 ms first byte (512 MB)
  output     a tool printing -size MB to a pipe through guard against a bash exec shim
  rebuild    a cold rebuild of the CMake fixture through guard against bare cmake
  prewarm    a fresh shell to its first answered llama call, with and without guard install --prewarm
  all        every table and Go benchmark as the Markdown of docs/BENCHMARKS.md

flags (after the command):
`

// run is the whole program; it returns the exit status: 0 done (goals
// missed included), 1 a benchmark could not run, 2 a usage mistake.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	knobs := Unset
	fs.IntVar(&knobs.Runs, "runs", -1, "samples a row over all rounds (-1: the table's default: shim 300, output 10, download 5, rebuild 3, prewarm 3)")
	fs.IntVar(&knobs.Rounds, "rounds", -1, "interleaved rounds, at most -runs (-1: the table's default)")
	fs.IntVar(&knobs.Warmup, "warmup", -1, "untimed runs of a row before its samples in each round (-1: the table's default)")
	fs.StringVar(&knobs.Stat, "stat", "", "what ratios and goals compare: "+strings.Join(Stats, ", ")+" (default median)")
	keep := fs.Bool("keep", false, "keep the temp folder (sandboxes, binaries, each row's last stderr)")
	guard := fs.String("guard", "", "time this guard binary instead of building one (built with other tags, say)")
	baseline := fs.String("baseline", "", "shim: also time this guard binary (today's main, say) and this build on the exec and supervised paths, each installed alike, side by side")
	sizeMB := fs.Int("size", -1, "download: the model's size in MB (default 256; download-capped 512); output: what the tool prints, in MB (default 200)")
	out := fs.String("o", "", "all: write into this file, keeping what is above its generated part (default: stdout)")
	installManagers := fs.Bool("install-managers", false, "shim: install the other shim managers that are not on PATH into the temp folder (mise with npm, asdf and aqua-proxy with go install)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fs.Usage()
			return 0
		}
		fmt.Fprintln(stderr, "bench: name a command: shim, download, download-capped, output, rebuild, prewarm or all (go run ./cmd/bench -h)")
		return 2
	}
	cmd := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected argument %q (flags go after the command)\n", fs.Arg(0))
		return 2
	}
	if *sizeMB == 0 || *sizeMB < -1 {
		fmt.Fprintf(stderr, "bench: -size %d: want at least 1 (MB)\n", *sizeMB)
		return 2
	}
	if err := checkOverrides(knobs); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if *out != "" && cmd != "all" {
		fmt.Fprintln(stderr, "bench: -o is for all")
		return 2
	}
	all := tables(*sizeMB)
	var table *Table
	if cmd != "all" {
		i := slices.IndexFunc(all, func(t *Table) bool { return t.Name == cmd })
		if i < 0 {
			fmt.Fprintf(stderr, "bench: unknown command %q (go run ./cmd/bench -h)\n", cmd)
			return 2
		}
		table = all[i]
	}

	repo, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if *guard != "" {
		if *guard, err = filepath.Abs(*guard); err == nil {
			err = executable(*guard)
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: -guard: %v\n", err)
			return 2
		}
	}
	if *baseline != "" {
		if *baseline, err = filepath.Abs(*baseline); err == nil {
			err = executable(*baseline)
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: -baseline: %v\n", err)
			return 2
		}
		for _, t := range all {
			if t.Name == "shim" {
				t.Rows = append(t.Rows, baselineRows(*baseline, FullScale.LogBytes[len(FullScale.LogBytes)-1])...)
			}
		}
	}
	root, err := os.MkdirTemp("", "guard-bench.")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	defer func() {
		if *keep {
			fmt.Fprintln(stderr, "kept", root)
		} else {
			os.RemoveAll(root)
		}
	}()
	rn := &Runner{Repo: repo, Root: root, Knobs: knobs, Guard: *guard, Log: stderr, Managers: *installManagers}

	if table == nil {
		err = writeAll(ctx, stderr, sections(ctx, rn, all), *out, stdout)
	} else {
		var rep *Report
		if rep, err = rn.Run(ctx, table); err == nil {
			err = rep.Format(stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// checkOverrides rejects knobs no table could run with; -1 keeps a
// table's default.
func checkOverrides(k Knobs) error {
	switch {
	case k.Runs == 0 || k.Runs < -1:
		return fmt.Errorf("-runs %d: want at least 1", k.Runs)
	case k.Rounds == 0 || k.Rounds < -1:
		return fmt.Errorf("-rounds %d: want at least 1", k.Rounds)
	case k.Warmup < -1:
		return fmt.Errorf("-warmup %d: want 0 or more", k.Warmup)
	case k.Stat != "":
		if _, err := (Summary{}).Stat(k.Stat); err != nil {
			return fmt.Errorf("-stat: %w", err)
		}
	}
	return nil
}

// moduleRoot is the folder of guard's go.mod, found by the go command as
// for any build: the harness builds guard and reads its testdata from there.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	data, err := os.ReadFile(gomod)
	if err != nil || !strings.HasPrefix(string(data), "module github.com/sandbox-guard/guard\n") {
		return "", fmt.Errorf("run it from inside guard's repository (go.mod found: %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}
