package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestShimSmoke runs the start-up table for real with one sample a row:
// it builds guard, the floors and the spawn helper, installs guard in a
// sandbox, probes its paths and times every row. The figures mean nothing
// here; that every row runs and the probe finds guard's two paths does.
func TestShimSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds guard (half a minute with a cold build cache)")
	}
	repo, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	var log bytes.Buffer
	rn := &Runner{Repo: repo, Root: t.TempDir(), Knobs: Knobs{Runs: 1, Rounds: 1, Warmup: 0}, Log: &log}
	table := shimTable(Scale{Tools: []int{1, 300}, Models: []int{1, 5}, Entries: []int{0, 30}, LogBytes: []int64{1 << 10, 6 << 20}})
	rep, err := rn.Run(context.Background(), table)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var out bytes.Buffer
	if err := rep.Format(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if len(rep.Results) != len(table.Rows) {
		t.Fatalf("%d results for %d rows", len(rep.Results), len(table.Rows))
	}
	paths := map[string]string{"guard-plain": "exec", "guard-npx": "supervised", "guard-slowtool": "supervised", "guard-cache-hit": "cache hit"}
	for _, r := range rep.Results {
		if strings.HasSuffix(r.Name, "-shim") && r.Name != "bash-shim" && strings.Contains(r.Skipped, "is not installed") {
			continue // another manager, not on this machine: tests never install one
		}
		if r.Skipped != "" || r.Summary.N != 1 || r.Summary.Median <= 0 || r.Summary.MaxRSS <= 0 {
			t.Errorf("%s: skipped %q, %+v", r.Name, r.Skipped, r.Summary)
		}
		if want, ok := paths[r.Name]; ok && (r.Goal == nil || !strings.HasPrefix(r.Goal.What, want+" ")) {
			t.Errorf("%s: goal %v, want guard's %s path", r.Name, r.Goal, want)
		}
	}
	// Only the cache-hit row's warm-up may log (the answer it stores; a hit
	// logs nothing); and the log is the sandbox's, never the real one.
	if log := rep.Notes[len(rep.Notes)-1]; !strings.HasPrefix(log, "guard's heal log: 1 event (cache.store 1)") {
		t.Errorf("heal log note %q, want the cache's store alone", log)
	}
	if home != "" {
		if _, err := os.Stat(home + "/.shim/plain"); err == nil {
			t.Errorf("a shim named plain appeared in the real %s/.shim", home)
		}
	}
}

// TestRows runs a table of plain shell rows through the whole harness:
// stdin and stdout files, a drained pipe, the table's and the row's
// environment, an expected exit status, Before once a sample or warm-up,
// a row whose Setup fails (skipped, the others timed); then a wrong
// status and a sample past its time limit, which end the table.
func TestRows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the spawn helper")
	}
	repo, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	rn := &Runner{Repo: repo, Root: t.TempDir(), Knobs: Unset, Log: io.Discard}
	var dir string
	before := 0
	table := &Table{
		Name:  "rows",
		Knobs: Knobs{Runs: 3, Rounds: 2, Warmup: 1},
		Env:   []string{"GREETING=hello"},
		Setup: func(s *Sandbox) error {
			dir = s.Dir
			return s.WriteFile("$TMP/in.txt", "from stdin\n", 0o644)
		},
		Rows: []Row{
			{Name: "stdio", Argv: []string{"sh", "-c", `cat; echo "$GREETING $ROW $HOME"`}, Env: []string{"ROW=row"}, Stdin: "$TMP/in.txt", Stdout: "$TMP/out.txt"},
			{Name: "pipe", Argv: []string{"sh", "-c", "head -c 3000000 /dev/zero"}, Pipe: true},
			{Name: "status", Argv: []string{"sh", "-c", "exit 3"}, Status: 3, Before: func(*Sandbox) error { before++; return nil }},
			{Name: "missing", Setup: func(*Sandbox, *Row) error { return errors.New("not here") }, Argv: []string{"true"}},
		},
	}
	rep, err := rn.Run(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		switch {
		case r.Name == "missing":
			if r.Skipped != "not here" {
				t.Errorf("missing: skipped %q", r.Skipped)
			}
		case r.Skipped != "" || r.Summary.N != 3:
			t.Errorf("%s: skipped %q, %d samples, want 3", r.Name, r.Skipped, r.Summary.N)
		}
	}
	if before != 3+2 {
		t.Errorf("Before ran %d times, want 5 (3 samples, 1 warm-up in each of 2 rounds)", before)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
	if want := "from stdin\nhello row " + filepath.Join(dir, "home") + "\n"; string(out) != want {
		t.Errorf("stdout file %q, want %q", out, want)
	}

	// Only the row that hangs gets the short timeout: on a loaded machine sh
	// may take longer than that to fail, which would time it out instead.
	for _, tc := range []struct {
		row     Row
		timeout time.Duration
		want    string
	}{
		{Row{Name: "fails", Argv: []string{"sh", "-c", "echo oops >&2; exit 1"}}, 10 * time.Second, "exited 1, want 0; stderr:\noops"},
		{Row{Name: "hangs", Argv: []string{"sleep", "10"}}, 200 * time.Millisecond, "still running after 200ms"},
	} {
		bad := &Table{Name: "bad", Knobs: Knobs{Runs: 1, Rounds: 1}, Timeout: tc.timeout, Rows: []Row{tc.row}}
		start := time.Now()
		if _, err := rn.Run(context.Background(), bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.row.Name, err, tc.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", tc.row.Name, d)
		}
	}
}
