package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
)

// testBed is an engine over a temporary HOME whose reach beyond files is
// faked: exec and supervised runs are recorded and answered from a script,
// builds and package installs are functions the test sets. Nothing it does
// starts a process.
type testBed struct {
	t      *testing.T
	dir    string
	home   string
	e      *Engine
	stdout bytes.Buffer
	stderr bytes.Buffer

	mu    sync.Mutex
	execs [][]string      // argv of every exec
	specs []runner.Spec   // every supervised run, in order
	runs  []runner.Result // scripted results, taken in order; then Exited 0
	// onRun, when set, answers a supervised run instead of runs.
	onRun func(runner.Spec) runner.Result
	build func(ctx context.Context, tool string, rec *manifest.Build, target string) error
	apt   func(ctx context.Context, tool string, pkgs []string) error
	jobs  sync.WaitGroup // heals running detached (goroutineJobs)
}

// newBed writes manifest (with $HOME and $DIR expanded) and builds the
// engine; env adds to the World's environment.
func newBed(t *testing.T, manifestTOML string, env ...string) *testBed {
	t.Helper()
	dir := t.TempDir()
	b := &testBed{t: t, dir: dir, home: filepath.Join(dir, "home")}
	if err := os.MkdirAll(b.home, 0o755); err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(dir, "manifest.toml")
	text := strings.NewReplacer("$HOME", b.home, "$DIR", dir).Replace(manifestTOML)
	if err := os.WriteFile(mf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	w := World{
		Env: append([]string{
			"HOME=" + b.home,
			"PATH=" + filepath.Join(dir, "bin"),
			"GUARD_MANIFEST=" + mf,
			"GUARD_SHIM_DIR=" + filepath.Join(b.home, ".shim"),
			"GUARD_STATE_DIR=" + filepath.Join(dir, "state"),
			"GUARD_LOG=" + filepath.Join(dir, "selfheal.log"),
		}, env...),
		Stdout: &b.stdout,
		Stderr: &b.stderr,
		Self:   filepath.Join(dir, "guard-self"),
	}
	if err := os.WriteFile(w.Self, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(w)
	if err != nil {
		t.Fatal(err)
	}
	b.e = New(c)
	b.e.exec = func(path string, argv, env []string) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.execs = append(b.execs, argv)
		return nil
	}
	b.e.run = func(ctx context.Context, s runner.Spec) runner.Result {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.specs = append(b.specs, s)
		if b.onRun != nil {
			return b.onRun(s)
		}
		if len(b.runs) == 0 {
			return runner.Result{Outcome: runner.Exited}
		}
		r := b.runs[0]
		b.runs = b.runs[1:]
		if s.Stdout != nil {
			r.Stdout.WriteTo(s.Stdout)
		}
		return r
	}
	b.e.binaries = bedBinaries{b}
	b.e.jobs = goroutineJobs{b}
	t.Cleanup(b.e.Close)
	t.Cleanup(b.waitJobs)
	return b
}

// goroutineJobs is the detacher of unit tests, which cannot spawn a guard
// binary: the heal runs in a goroutine of the test, holding the job's
// claim until it ends, with its messages in the job's log as a detached
// heal's are.
type goroutineJobs struct{ b *testBed }

func (g goroutineJobs) detach(j *healjob.Job, spec jobSpec) error {
	e := g.b.e
	logf, err := os.Create(healjob.LogPath(e.c.StateDir, j.Record().Key))
	if err != nil {
		return err
	}
	c := *e.c
	c.Stderr = logf
	// An engine of its own, as the detached process has: its
	// collaborators (the model healer) write to its own stderr.
	heal := New(&c)
	heal.log, heal.exec, heal.run, heal.binaries, heal.jobs = e.log, e.exec, e.run, e.binaries, e.jobs
	g.b.jobs.Add(1)
	go func() {
		defer g.b.jobs.Done()
		defer logf.Close()
		err := heal.healHere(context.Background(), spec)
		finishJob(j, err)
		j.Close()
	}()
	return nil
}

// waitJobs waits for the heals the test started to end.
func (b *testBed) waitJobs() { b.jobs.Wait() }

type bedBinaries struct{ b *testBed }

func (f bedBinaries) Build(ctx context.Context, tool string, rec *manifest.Build, target string) error {
	if f.b.build == nil {
		f.b.t.Fatalf("unexpected build of %s", tool)
	}
	return f.b.build(ctx, tool, rec, target)
}

// RestoreNow has no stash in the bed: a heal builds.
func (f bedBinaries) RestoreNow(ctx context.Context, tool string, rec *manifest.Build, target string) bool {
	return false
}

func (f bedBinaries) InstallPackages(ctx context.Context, tool string, pkgs []string) error {
	if f.b.apt == nil {
		f.b.t.Fatalf("unexpected install of %v", pkgs)
	}
	return f.b.apt(ctx, tool, pkgs)
}

// tool writes an executable script at path (below the bed's folder when
// relative) and returns its absolute path.
func (b *testBed) tool(path string) string {
	b.t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(b.dir, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		b.t.Fatal(err)
	}
	return path
}

// events reads the heal log back as maps, in order.
func (b *testBed) events() []map[string]any {
	b.t.Helper()
	b.e.Close() // flush; a fresh log takes the events that follow
	b.e.log = heallog.New(b.e.c.LogPath, b.e.c.Stderr)
	data, err := os.ReadFile(filepath.Join(b.dir, "selfheal.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		b.t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			b.t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// event returns the first logged event named name, or fails.
func (b *testBed) event(name string) map[string]any {
	b.t.Helper()
	for _, ev := range b.events() {
		if ev["event"] == name {
			return ev
		}
	}
	b.t.Fatalf("no %s event in the log", name)
	return nil
}
