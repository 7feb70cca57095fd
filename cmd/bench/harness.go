package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Row is one command of a table, timed side by side with the other rows.
// Argv, Env, Dir, Stdin and Stdout may name the sandbox's variables
// ($HOME, $TMP, $TOOLS, $BUILT, ..., see Sandbox.Vars), expanded once the
// table's and the row's Setup have run.
type Row struct {
	Name string
	// Setup runs once, after the table's Setup and before any sample: files
	// and binaries this row needs. It may fill in the row (its Goal after a
	// probe, say). An error skips the row, not the table, and so does a
	// program that is not installed; the report says why.
	Setup func(s *Sandbox, r *Row) error
	// Before runs before every sample, untimed: it puts back what the
	// previous sample changed (an evicted build folder, a downloaded file).
	Before func(s *Sandbox) error
	Argv   []string
	Env    []string // KEY=VALUE on top of the sandbox's and the table's
	Dir    string   // working folder; the sandbox's $TMP when empty
	Stdin  string   // file read as stdin; /dev/null when empty
	Stdout string   // file stdout is written to (truncated each sample); /dev/null when empty
	// Pipe gives the command a pipe for stdout that the harness drains, as a
	// script's $(...) would; it overrides Stdout.
	Pipe   bool
	Status int // the exit status every sample must have
	Goal   *Goal
}

// Goal is what a row must reach: its figure (the table's statistic) at
// most Max times the Anchor row's, and with MaxRSS its median maximum RSS
// at most that many bytes.
type Goal struct {
	Anchor string
	Max    float64
	MaxRSS int64
	What   string // how the goal reads in the report; "<= 1.10x zap-floor" when empty
	And    *Goal  // a second goal the row must also reach (another anchor)
}

func (g *Goal) String() string {
	s := g.What
	if s == "" {
		s = fmt.Sprintf("<= %.2fx %s", g.Max, g.Anchor)
	}
	if g.And != nil {
		s += " and " + g.And.String()
	}
	if g.MaxRSS > 0 {
		s += fmt.Sprintf(", rss < %d MB", g.MaxRSS>>20)
	}
	return s
}

// Table is a set of rows sampled together: every round runs each row's
// warm-up and share of samples, rows shuffled anew each round.
type Table struct {
	Name    string   // the subcommand that runs it alone
	Title   string   // the section heading in BENCHMARKS.md
	Anchors []string // rows every other row is compared to, one ratio column each
	Env     []string // KEY=VALUE for every row
	// Bytes is what every sample moves; when set, the report adds MB/s.
	Bytes int64
	// Setup runs once, before the rows' Setups: what several rows share.
	Setup   func(s *Sandbox) error
	Rows    []Row
	Knobs   Knobs         // defaults; flags override
	Timeout time.Duration // one sample's limit; 2 minutes when zero
	// Note, when set, adds a line under the table after the samples: a
	// figure that is not a time (the size of what a row restored).
	Note func(s *Sandbox) (string, error)
}

// Knobs say how much to sample. In overrides (Runner.Knobs, the flags) a
// negative number or an empty Stat takes the table's default.
type Knobs struct {
	Runs   int    // samples a row, over all rounds
	Rounds int    // interleaved rounds (at most Runs)
	Warmup int    // untimed runs of a row before its samples in each round
	Stat   string // what ratios and goals compare: median, mean or cpu
}

// Unset is overrides that keep every default.
var Unset = Knobs{Runs: -1, Rounds: -1, Warmup: -1}

// Merge returns k with every unset field taken from def.
func (k Knobs) Merge(def Knobs) Knobs {
	if k.Runs < 0 {
		k.Runs = def.Runs
	}
	if k.Rounds < 0 {
		k.Rounds = def.Rounds
	}
	if k.Warmup < 0 {
		k.Warmup = def.Warmup
	}
	if k.Stat == "" {
		k.Stat = cmpOr(def.Stat, "median")
	}
	return k
}

// Check validates merged knobs and caps Rounds at Runs: a round needs at
// least one sample of each row.
func (k *Knobs) Check() error {
	if k.Runs < 1 {
		return fmt.Errorf("runs %d: want at least 1", k.Runs)
	}
	if k.Rounds < 1 {
		return fmt.Errorf("rounds %d: want at least 1", k.Rounds)
	}
	if k.Warmup < 0 {
		return fmt.Errorf("warmup %d: want 0 or more", k.Warmup)
	}
	if _, err := (Summary{}).Stat(k.Stat); err != nil {
		return err
	}
	k.Rounds = min(k.Rounds, k.Runs)
	return nil
}

// Result is one row's outcome.
type Result struct {
	Name    string
	Summary Summary
	Goal    *Goal
	Skipped string // why the row was not timed; empty when it was
}

// Report is one table's outcome, ready to print.
type Report struct {
	Table   *Table
	Knobs   Knobs
	Results []Result
	Notes   []string // lines printed under the table
}

// Runner runs tables. One Runner builds each binary once for all its tables.
type Runner struct {
	Repo  string    // the module's root
	Root  string    // a temp folder holding every sandbox; the caller removes it
	Knobs Knobs     // overrides from the flags (Unset keeps each table's defaults)
	Guard string    // a guard binary built elsewhere, timed instead of building one
	Log   io.Writer // progress
	// Managers lets the rows of other shim managers install a manager
	// that is not on PATH into Root (npm install, go install): for the
	// command line's -install-managers, never for tests.
	Managers bool
	binErr   map[string]error
	bins     map[string]string
}

// Run sets up a sandbox for t, samples its rows and reports.
func (rn *Runner) Run(ctx context.Context, t *Table) (*Report, error) {
	k := rn.Knobs.Merge(t.Knobs)
	if err := k.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	spawn, err := rn.build("./cmd/bench/spawn")
	if err != nil {
		return nil, err
	}
	s, err := rn.newSandbox(t)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if t.Setup != nil {
		if err := t.Setup(s); err != nil {
			return nil, fmt.Errorf("%s: setup: %w", t.Name, err)
		}
	}
	rep := &Report{Table: t, Knobs: k, Notes: []string{
		fmt.Sprintf("%s a row in %s, rows shuffled each round; %s a row a round", count(k.Runs, "sample"), count(k.Rounds, "round"), count(k.Warmup, "untimed warm-up run")),
	}}
	var live []*liveRow
	seen := map[string]bool{}
	for i := range t.Rows {
		r := t.Rows[i] // a copy: Setup may fill it in
		if seen[r.Name] || r.Name == "" {
			return nil, fmt.Errorf("%s: row name %q is empty or used twice", t.Name, r.Name)
		}
		seen[r.Name] = true
		lr, err := s.prepare(t, &r, spawn)
		if err != nil {
			rep.Results = append(rep.Results, Result{Name: r.Name, Skipped: err.Error()})
			fmt.Fprintf(rn.Log, "%s: %s skipped: %v\n", t.Name, r.Name, err)
			continue
		}
		lr.result = len(rep.Results)
		rep.Results = append(rep.Results, Result{Name: r.Name, Goal: r.Goal})
		live = append(live, lr)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	samples := make([][]Sample, len(live))
	for round, order := range Schedule(len(live), k.Rounds, rng) {
		fmt.Fprintf(rn.Log, "%s: round %d/%d\n", t.Name, round+1, k.Rounds)
		for _, i := range order {
			lr := live[i]
			for range k.Warmup {
				if _, err := lr.sample(ctx); err != nil {
					return nil, fmt.Errorf("%s: %s: warm-up: %w", t.Name, lr.row.Name, err)
				}
			}
			for range Share(k.Runs, k.Rounds, round) {
				smp, err := lr.sample(ctx)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", t.Name, lr.row.Name, err)
				}
				samples[i] = append(samples[i], smp)
			}
		}
	}
	for i, lr := range live {
		rep.Results[lr.result].Summary = Summarize(samples[i])
	}
	if t.Note != nil {
		note, err := t.Note(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		rep.Notes = append(rep.Notes, note)
	}
	if note, err := healLogNote(s.Vars["GUARD_LOG"]); err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	} else if note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	return rep, nil
}

// liveRow is a row ready to sample: everything expanded and resolved, so a
// sample spends its time in the command, not in the harness.
type liveRow struct {
	row     *Row
	s       *Sandbox
	spawn   string // the spawn helper
	report  string // where it writes a sample's figures
	path    string // argv[0] resolved
	argv    []string
	env     []string
	dir     string
	stdin   string
	stdout  string
	stderr  string // the last sample's stderr, shown when it fails
	timeout time.Duration
	result  int // index in Report.Results
}

// prepare runs the row's Setup, expands its strings and resolves its
// program.
func (s *Sandbox) prepare(t *Table, r *Row, spawn string) (*liveRow, error) {
	if r.Setup != nil {
		if err := r.Setup(s, r); err != nil {
			return nil, err
		}
	}
	if len(r.Argv) == 0 {
		return nil, errors.New("no command")
	}
	lr := &liveRow{row: r, s: s, spawn: spawn, timeout: t.Timeout}
	if lr.timeout == 0 {
		lr.timeout = 2 * time.Minute
	}
	for _, a := range r.Argv {
		lr.argv = append(lr.argv, s.Expand(a))
	}
	lr.env = s.env
	for _, kv := range append(append([]string(nil), t.Env...), r.Env...) {
		lr.env = setEnv(lr.env, s.Expand(kv))
	}
	path, err := s.LookPath(lr.argv[0])
	if err != nil {
		return nil, err
	}
	lr.path = path
	lr.dir = cmpOr(s.Expand(r.Dir), s.Dir)
	lr.stdin = cmpOr(s.Expand(r.Stdin), os.DevNull)
	lr.stdout = cmpOr(s.Expand(r.Stdout), os.DevNull)
	lr.stderr = filepath.Join(s.Dir, "samples", safeName(r.Name)+".stderr")
	lr.report = filepath.Join(s.Dir, "samples", safeName(r.Name)+".report")
	if err := os.MkdirAll(filepath.Dir(lr.stderr), 0o755); err != nil {
		return nil, err
	}
	return lr, nil
}

// setEnv is env with kv (KEY=VALUE) in place of KEY's entry, or added: a
// duplicated key would be read as its first entry by some programs and as
// its last by others.
func setEnv(env []string, kv string) []string {
	key, _, _ := strings.Cut(kv, "=")
	out := make([]string, 0, len(env)+1)
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); k != key {
			out = append(out, e)
		}
	}
	return append(out, kv)
}

// count is "1 sample", "3 samples".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// safeName makes a row name usable as a file name.
func safeName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, name)
}

// sample runs the row's command once, through the spawn helper
// (cmd/bench/spawn), which times it from start to wait and reads its
// rusage: CPU of the command and the children it waited for (a supervised
// tool), the high-water RSS across exec (guard's own start-up counts on
// both of its paths), page faults.
func (lr *liveRow) sample(ctx context.Context) (Sample, error) {
	if b := lr.row.Before; b != nil {
		if err := b(lr.s); err != nil {
			return Sample{}, fmt.Errorf("before: %w", err)
		}
	}
	if err := os.Remove(lr.report); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Sample{}, err
	}
	stdin, err := os.Open(lr.stdin)
	if err != nil {
		return Sample{}, err
	}
	defer stdin.Close()
	stderr, err := os.Create(lr.stderr)
	if err != nil {
		return Sample{}, err
	}
	defer stderr.Close()
	var stdout *os.File
	var drained chan error
	if lr.row.Pipe {
		pr, pw, err := os.Pipe()
		if err != nil {
			return Sample{}, err
		}
		defer pr.Close() // ends the drain if it is still running
		defer pw.Close()
		stdout = pw
		drained = make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, pr)
			drained <- err
		}()
	} else {
		stdout, err = os.OpenFile(lr.stdout, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return Sample{}, err
		}
		defer stdout.Close()
	}
	sctx, cancel := context.WithTimeout(ctx, lr.timeout)
	defer cancel()
	cmd := exec.CommandContext(sctx, lr.spawn, append([]string{lr.report, lr.path}, lr.argv...)...)
	cmd.Env, cmd.Dir = lr.env, lr.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	if drained != nil {
		// Our copy of the write end must go before the reader can see EOF;
		// a process the command left behind may hold another until the
		// sample's time is up.
		stdout.Close()
		select {
		case derr := <-drained:
			if err == nil {
				err = derr
			}
		case <-sctx.Done():
		}
	}
	if err := ctx.Err(); err != nil {
		return Sample{}, err
	}
	if sctx.Err() != nil {
		return Sample{}, fmt.Errorf("still running after %v; killed%s", lr.timeout, lr.stderrTail())
	}
	if err != nil {
		return Sample{}, fmt.Errorf("spawn %s: %w%s", lr.path, err, lr.stderrTail())
	}
	data, err := os.ReadFile(lr.report)
	if err != nil {
		return Sample{}, fmt.Errorf("spawn left no report: %w", err)
	}
	status, smp, err := parseReport(string(data))
	if err != nil {
		return Sample{}, err
	}
	if status != lr.row.Status {
		return Sample{}, fmt.Errorf("%s exited %d, want %d%s", strings.Join(lr.argv, " "), status, lr.row.Status, lr.stderrTail())
	}
	return smp, nil
}

// parseReport reads the spawn helper's line: status, wall ns, CPU ns,
// max RSS KiB, minor and major faults.
func parseReport(line string) (int, Sample, error) {
	var status int
	var wall, cpu, rss, minflt, majflt int64
	if _, err := fmt.Sscan(line, &status, &wall, &cpu, &rss, &minflt, &majflt); err != nil {
		return 0, Sample{}, fmt.Errorf("spawn report %q: %w", line, err)
	}
	return status, Sample{Wall: time.Duration(wall), CPU: time.Duration(cpu), MaxRSS: rss << 10, Faults: minflt + majflt}, nil
}

// stderrTail is the end of the last sample's stderr, for error messages.
func (lr *liveRow) stderrTail() string {
	data, err := os.ReadFile(lr.stderr)
	if err != nil || len(data) == 0 {
		return ""
	}
	const max = 2000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return "; stderr:\n" + strings.TrimRight(string(data), "\n")
}
