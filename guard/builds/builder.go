// Package builds heals evicted binaries: it checks cheaply that a binary and
// the shared libraries it loads are all there (CheckBinary), rebuilds it from
// its manifest recipe under a per-build lock when they are not (Builder.Build),
// and installs the Debian packages a recipe needs.
//
// A rebuild is visible (a progress line on stderr, the full output in
// STATE/builds/NAME.log) and bounded (the heal timeout kills the step's whole
// process group, SIGTERM first so make and the compiler can remove half
// written objects that would poison the next build; a step that ends
// within the grace is a clean stop that keeps everything built). Steps are
// argv lists run without a shell. Success is decided by checking the
// target again, not by the steps' exit status alone. A build killed mid
// way (guard SIGKILLed with its steps, or a step SIGKILLed after the grace)
// is survivable: the next rebuild finds its marker and removes the outputs
// provably cut short that make would trust (in the recipe's output folders,
// nothing else, and never a whole file), and a step orphaned by a guard
// killed alone keeps the build lock until it ends.
package builds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// Builder rebuilds binaries and installs packages for one guard call.
type Builder struct {
	StateDir    string                      // locks/, stamps/ and builds/<name>.log below it
	Log         func(heallog.Event)         // heal events; nil drops them
	Stderr      io.Writer                   // progress and notices; nil discards
	Package     func(command string) string // the Debian package of a command (manifest [packages]); nil or "": the command's name
	HealTimeout time.Duration               // bound on a build or install, lock wait included; 0 = none
	Grace       time.Duration               // between SIGTERM and SIGKILL of a stopped step's group; 0 = 3s
	// Pace is how often a progress line is printed off a terminal (0:
	// progress.DefaultEvery), or who observes it instead (a detached heal).
	Pace progress.Pace
	Env  []string // base environment for steps; nil = os.Environ()
	// Stash keeps what good builds made and restores it before a build
	// (stash.go); nil = no stash. Tools lists the paths of the manifest's
	// tools a recipe builds, the binaries its entry keeps; nil = the
	// target alone.
	Stash *stash.Store
	Tools func(recipe string) []string
	// PushTo starts, in the background, the push of the entry of recipe
	// for key to a recipe's stash_to, which lets go of the fleet's lease
	// of id once it is pushed (fleet.go; "" = none); nil = none is pushed.
	PushTo func(recipe, key, dest, leaseID string) error
	// Fleet reaches the fleet's build leases (fleet.go); nil = none.
	Fleet *lease.Fleet

	geteuid func() int // nil = os.Geteuid; a test plays root or not (SetEUID)
}

func (b *Builder) layout() state.Layout { return state.Layout{Dir: b.StateDir} }

// StampDir is where CheckBinary stamps live; callers checking a binary on the
// fast path should pass the same folder.
func (b *Builder) StampDir() string { return b.layout().Stamps() }

// LogPath is the build log of the recipe named name.
func (b *Builder) LogPath(name string) string {
	return filepath.Join(b.layout().Builds(), safeName(name)+".log")
}

// Build makes target healthy by running rec. It takes the build's lock,
// checks the target again (another process may have rebuilt it meanwhile),
// installs missing commands the recipe needs, clones the sources when their
// folder is gone and the recipe names a repo, then runs each step in rec.Dir.
// A stashed build matching the recipe's key is restored instead of running
// the steps (stash.go; after the clone when the sources were missing), and
// a good build is stashed.
// It succeeds only when target then passes CheckBinary; otherwise the error
// is a *BuildError naming the step, its status and the log. An empty target
// means "run the recipe": the steps' status alone decides.
func (b *Builder) Build(ctx context.Context, tool string, rec *manifest.Build, target string) error {
	if rec == nil {
		return errors.New("build: no recipe")
	}
	if b.StateDir == "" {
		return errors.New("build: no state folder set")
	}
	name := safeName(rec.Name)
	if len(rec.Steps) == 0 {
		return fmt.Errorf("build %s: the recipe has no steps", name)
	}
	if rec.Dir == "" {
		return fmt.Errorf("build %s: the recipe has no dir", name)
	}
	limit := b.HealTimeout
	if rec.Timeout > 0 {
		limit = rec.Timeout.D()
	}
	if limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, limit, errHealLimit)
		defer cancel()
	}
	held, err := lock.Acquire(ctx, b.layout().Lock("build-"+name), func() {
		fmt.Fprintf(b.stderr(), "guard: another process is building %s; waiting\n", name)
		b.event(heallog.Event{Event: heallog.LockWait, Tool: tool, Target: name, Reason: "build"})
	})
	if err != nil {
		return fmt.Errorf("wait for build %s: %w", name, err)
	}
	defer held.Release()

	reason := "requested"
	if target != "" {
		h := CheckBinary(target, b.StampDir(), b.libraryPath())
		if h.OK {
			return nil
		}
		reason = h.Reason
	}
	j := job{tool: tool, name: name, rec: rec, target: target, fleet: &fleetTurn{}}
	key, restored := b.restore(ctx, j)
	if restored || b.takeTurn(ctx, j, key) {
		return nil
	}
	if ctx.Err() != nil {
		// The heal's limit ended while it waited for another sandbox's
		// build: no build of its own can start in no time.
		return fmt.Errorf("build %s: waiting for the fleet's build: %w", name, context.Cause(ctx))
	}
	start := time.Now()
	err = b.rebuild(ctx, j, reason, limit, held.File())
	if errors.Is(err, errRestoredAfterClone) {
		return nil
	}
	result := "ok"
	level := "info"
	if err != nil {
		result, level = "failed", "error"
		if errors.Is(err, context.DeadlineExceeded) {
			result = "timeout"
		}
	}
	b.event(heallog.Event{
		Level: level, Event: heallog.BinaryRebuild, Tool: tool, Target: target,
		Reason: reason, Result: result, DurationMS: time.Since(start).Milliseconds(),
	})
	pushing := false
	if err == nil {
		pushing = b.stashBuild(ctx, j, key)
	}
	b.letGo(j, pushing)
	return err
}

// job is one build a heal asks for: the tool that needs it, the recipe's
// name and the recipe, the output that must come back ("" for a build
// asked for by name), and its part in the fleet's lease (fleet.go; nil
// for a restore alone).
type job struct {
	tool, name string
	rec        *manifest.Build
	target     string
	fleet      *fleetTurn
}

// errRestoredAfterClone is rebuild's word that the clone it made matched a
// stash entry, which was restored: the target is healthy and no step ran.
var errRestoredAfterClone = errors.New("restored from the stash after the clone")

// rebuild runs the recipe under the build lock, whose file it hands to
// every step (see run), and keeps the interrupted-build marker around the
// steps (interrupted.go).
func (b *Builder) rebuild(ctx context.Context, j job, reason string, limit time.Duration, lockFile *os.File) error {
	tool, name, rec, target := j.tool, j.name, j.rec, j.target
	if err := b.EnsureCommands(ctx, tool, rec.Needs); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	logPath := b.LogPath(name)
	logf, err := openLog(logPath)
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	defer logf.Close()
	what := target
	if what == "" {
		what = name
	}
	fmt.Fprintf(b.stderr(), "guard: rebuilding %s (%s: %s); log: %s\n", name, what, reason, logPath)
	fmt.Fprintf(logf, "== guard: build %s at %s (%s: %s)\n", name, time.Now().Format(time.RFC3339), what, reason)

	cold := FromNothing(rec) // before the clone: a clone makes a build from nothing too
	startProgress := func() *progress.Reporter {
		rep := progress.Start(b.stderr(), "building "+name, 0, b.Pace)
		j.fleet.rep.Store(rep) // a lease taken carries its progress
		if took, ok := Expected(b.StateDir, rec); ok {
			rep.Expect(took) // the time left is the last good build's (of this kind) share still to do
		}
		return rep
	}
	rep := startProgress()
	out := &tailWriter{w: logf}
	start := time.Now()
	fail := func(e *BuildError) error {
		rep.Stop("")
		e.Name, e.Log, e.Steps, e.Limit = name, logPath, len(rec.Steps), limit
		if !errors.Is(context.Cause(ctx), errHealLimit) {
			e.Limit = 0 // a deadline of the caller's, not the heal's own limit
		}
		if e.Last == "" {
			e.Last = out.Last()
		}
		fmt.Fprintf(logf, "== guard: %s\n", e.Error())
		return e
	}

	cloned := false
	if _, err := os.Stat(rec.Dir); errors.Is(err, os.ErrNotExist) {
		cloned = true
		if err := b.clone(ctx, rec, out, rep, lockFile); err != nil {
			var be *BuildError
			if errors.As(err, &be) {
				return fail(be)
			}
			rep.Stop("")
			fmt.Fprintf(logf, "== guard: %v\n", err)
			return fmt.Errorf("build %s: %w", name, err)
		}
		// The sources are here now, so they have a key: an entry for
		// their revision (a fleet's, through stash_from) brings the build
		// back without running a step.
		key, ok := b.restore(ctx, j)
		if !ok {
			// A wait on the fleet's lease shows the holder's progress on
			// a line of its own: this build's line stops when the wait
			// begins, and starts again (its clock too) when this
			// sandbox builds after all.
			waiting := time.Now()
			j.fleet.pause = func() { rep.Stop("") }
			ok = b.takeTurn(ctx, j, key)
			j.fleet.pause = nil
			if j.fleet.waited {
				start = start.Add(time.Since(waiting))
				if !ok && ctx.Err() == nil {
					rep = startProgress()
				}
			}
		}
		if ok {
			rep.Stop("")
			fmt.Fprintf(logf, "== guard: restored %s from the stash after the clone; no step run\n", name)
			return errRestoredAfterClone
		}
		if ctx.Err() != nil {
			rep.Stop("")
			return fmt.Errorf("build %s: waiting for the fleet's build: %w", name, context.Cause(ctx))
		}
	}

	marker := b.markerPath(name)
	if err := b.startRun(j, marker, cloned, logf); err != nil {
		rep.Stop("")
		fmt.Fprintf(logf, "== guard: %v\n", err)
		return fmt.Errorf("build %s: %w", name, err)
	}
	// Steps that ended on their own (even with a failing status), or
	// within the grace after guard's SIGTERM, leave outputs make can
	// judge; only a step killed before it could clean up (SIGKILLed after
	// the grace, or by someone else) keeps the marker for the next rebuild.
	env := b.stepEnv()
	for i, step := range rec.ExpandedSteps() {
		if len(step) == 0 {
			os.Remove(marker)
			return fail(&BuildError{Index: i + 1, Status: -1, Err: errors.New("empty step")})
		}
		prefix := fmt.Sprintf("step %d/%d %s", i+1, len(rec.Steps), step[0])
		if j.fleet.held != nil {
			prefix = lease.ForTheFleet + ", " + prefix // guard status says the lease is held here
		}
		out.SetPrefix(prefix, rep)
		fmt.Fprintf(logf, "$ %s\n", QuoteArgv(step))
		if err := b.run(ctx, step, rec.Dir, env, out, lockFile); err != nil {
			e := b.stepError(ctx, i+1, step, err)
			if !e.interrupted() {
				os.Remove(marker)
			}
			return fail(e)
		}
	}
	os.Remove(marker)
	if target != "" {
		if h := CheckBinary(target, b.StampDir(), b.libraryPath()); !h.OK {
			return fail(&BuildError{Target: target, Reason: h.Reason, Status: -1})
		}
	}
	b.recordBuild(name, time.Since(start), time.Now(), cold)
	took := time.Since(start).Round(100 * time.Millisecond)
	fmt.Fprintf(logf, "== guard: build %s ok in %s\n", name, took)
	rep.Stop(fmt.Sprintf("guard: rebuilt %s in %s", name, took))
	return nil
}

// clone fetches the sources into rec.Dir, or explains how to. It clones
// into a sibling folder and renames it, so a clone cut short by the heal
// timeout never leaves a half-filled rec.Dir that later builds would trust.
func (b *Builder) clone(ctx context.Context, rec *manifest.Build, out *tailWriter, rep *progress.Reporter, lockFile *os.File) error {
	hint := QuoteArgv([]string{"git", "clone", "--depth", "1", rec.Repo, rec.Dir})
	if rec.Repo == "" {
		return fmt.Errorf("source folder %s is missing and the recipe names no repo; put the sources there", rec.Dir)
	}
	if _, ok := b.lookPath("git"); !ok {
		return fmt.Errorf("source folder %s is missing and git is not installed; run: %s", rec.Dir, hint)
	}
	parent := filepath.Dir(rec.Dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	partial := rec.Dir + ".guard-partial"
	if err := os.RemoveAll(partial); err != nil {
		return fmt.Errorf("remove an old partial clone: %w", err)
	}
	argv := []string{"git", "clone", "--depth", "1", rec.Repo, partial}
	out.SetPrefix("cloning "+rec.Repo, rep)
	fmt.Fprintf(out.w, "$ %s\n", QuoteArgv(argv))
	// A private or mistyped repo must fail, not wait for a password.
	env := append(b.baseEnv(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "SSH_ASKPASS=true")
	if err := b.run(ctx, argv, parent, env, out, lockFile); err != nil {
		_ = os.RemoveAll(partial)
		return b.stepError(ctx, 0, argv, err)
	}
	if err := os.Rename(partial, rec.Dir); err != nil {
		return fmt.Errorf("move the clone into place: %w; run: %s", err, hint)
	}
	return nil
}

// startRun scrubs what an interrupted earlier run cut short in the
// recipe's output folders, when its marker is there (under the build lock,
// so the run that wrote it is gone), and writes this run's marker. A fresh
// clone holds nothing of that run (and may hold committed binaries that
// must stay), so it is not scrubbed.
func (b *Builder) startRun(j job, marker string, cloned bool, logf io.Writer) error {
	tool, name, rec, target := j.tool, j.name, j.rec, j.target
	if fi, err := os.Lstat(marker); err == nil && !cloned {
		removed, err := scrubOutputs(rec.Dir, rec.Outputs, fi.ModTime(), logf)
		if err != nil {
			fmt.Fprintf(logf, "== guard: scrubbing the interrupted build: %v\n", err)
		}
		reason := fmt.Sprintf("interrupted build: removed %s it cut short", units.Count(len(removed), "output", "outputs"))
		fmt.Fprintf(b.stderr(), "guard: the last build of %s was interrupted (%s, marker %s); removed %s it cut short, kept everything whole\n",
			name, fi.ModTime().Format(time.DateTime), marker, units.Count(len(removed), "output", "outputs"))
		b.event(heallog.Event{Level: "warn", Event: heallog.BinaryRebuild, Tool: tool, Target: target, Reason: reason, Result: "cleaned"})
	}
	if target != "" {
		dropUnexecutableTarget(rec, target, logf)
	}
	return writeMarker(marker)
}

// dropUnexecutableTarget removes the heal's own target when the recipe's
// output folders hold it as a regular file without any execute bit. A
// linker sets the mode when it finishes, so that is what a link killed at
// its end left: a whole file, which the scrub keeps, but newer than its
// inputs, so make would never link it again and the heal would fail for
// good. Only the target itself, only below an output folder (opened as the
// scrub opens them, following no link), and only that case.
func dropUnexecutableTarget(rec *manifest.Build, target string, logf io.Writer) {
	top, err := os.OpenRoot(rec.Dir)
	if err != nil {
		return
	}
	defer top.Close()
	for _, out := range rec.Outputs {
		rel, err := filepath.Rel(filepath.Join(rec.Dir, filepath.Clean(out)), target)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		root, _ := outputRoot(top, out)
		if root == nil {
			continue
		}
		fi, err := root.Lstat(rel)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 == 0 && root.Remove(rel) == nil {
			fmt.Fprintf(logf, "== guard: removed %s (the target, without its execute bit: a link cut off before its end; make links it again)\n", target)
		}
		root.Close()
		return
	}
}

// stepEnv is the steps' environment: the base one, plus ccache as the
// compiler launcher when it is installed, which turns a rebuild of evicted
// objects from minutes into seconds.
func (b *Builder) stepEnv() []string {
	env := b.baseEnv()
	if _, ok := b.lookPath("ccache"); ok {
		for _, k := range []string{"CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER"} {
			if lookupEnv(env, k) == "" {
				env = append(env, k+"=ccache")
			}
		}
	}
	return env
}

func (b *Builder) baseEnv() []string {
	if b.Env == nil {
		return os.Environ()
	}
	return append([]string(nil), b.Env...)
}

func (b *Builder) stderr() io.Writer {
	if b.Stderr == nil {
		return io.Discard
	}
	return b.Stderr
}

func (b *Builder) event(e heallog.Event) {
	if b.Log != nil {
		b.Log(e)
	}
}

// safeName keeps a recipe name usable as a file name.
func safeName(name string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\n' {
			return '_'
		}
		return r
	}, name)
	if name == "" || name == "." || name == ".." {
		return "build"
	}
	return name
}

// QuoteArgv renders argv for a person to read or paste into a shell.
func QuoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

// libraryPath is the LD_LIBRARY_PATH the built tools will run with: the
// base environment's, read without copying that environment.
func (b *Builder) libraryPath() string {
	if b.Env == nil {
		return os.Getenv("LD_LIBRARY_PATH")
	}
	return lookupEnv(b.Env, "LD_LIBRARY_PATH")
}
