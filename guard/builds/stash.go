package builds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// A build that ended well is kept in the stash (package stash, docs/stash.md),
// and a heal of a missing or broken binary restores it before running any
// step: Build calls restore first and stashBuild after a good build.

// stashSteps are the steps a stash entry is keyed by: the recipe's steps
// with their targets expanded, the job count left out
// (manifest.Build.ResultSteps).
func stashSteps(rec *manifest.Build) [][]string { return rec.ResultSteps() }

// StashKey is the key a build of rec would be stashed under now.
func (b *Builder) StashKey(ctx context.Context, rec *manifest.Build) (stash.Key, error) {
	return stash.MakeKey(ctx, stash.KeyInput{Steps: stashSteps(rec), Dir: rec.Dir, Outputs: rec.Outputs, Env: b.baseEnv()})
}

// restore puts back the stashed build of rec matching its key, when target
// then passes CheckBinary. It says on stderr why when it does not, and logs
// binary.restore either way. The key is returned for stashBuild.
func (b *Builder) restore(ctx context.Context, j job) (stash.Key, bool) {
	rec := j.rec
	if b.Stash == nil || j.target == "" {
		return stash.Key{}, false
	}
	if _, err := os.Stat(rec.Dir); err != nil {
		return stash.Key{}, false // no sources to key by: the build clones them, then restores (rebuild)
	}
	start := time.Now()
	key, err := b.StashKey(ctx, rec)
	return key, b.restoreKeyed(ctx, j, key, err, start)
}

// RestoreNow is a call's fast path for an evicted build (docs/stash.md):
// in the call's own process, with no detached heal to start and follow,
// it restores rec's build from an entry the stash itself holds for the
// key of now, and reports whether target is healthy after it. It does
// nothing and says nothing (false) when the build lock is held (a build
// or a restore runs: the caller follows it), when no entry of the stash
// matches, or when the recipe has no stash: the heal then takes its usual
// way, a detached Build, which also looks at the stash_from sources.
func (b *Builder) RestoreNow(ctx context.Context, tool string, rec *manifest.Build, target string) bool {
	if b.Stash == nil || rec == nil || target == "" || rec.Dir == "" || len(rec.Steps) == 0 || b.StateDir == "" {
		return false
	}
	name := safeName(rec.Name)
	held, ok, err := lock.Try(b.layout().Lock("build-" + name))
	if err != nil || !ok {
		return false
	}
	defer held.Release()
	if CheckBinary(target, b.StampDir(), b.libraryPath()).OK {
		return true // healed by another process in the meantime
	}
	if _, err := os.Stat(rec.Dir); err != nil || !b.Stash.Has(rec.Name, stash.Key{}) {
		return false // no sources, or no entry of the recipe at all: no key to compute
	}
	start := time.Now()
	key, err := b.StashKey(ctx, rec)
	if err != nil || !b.Stash.Has(rec.Name, key) {
		return false
	}
	return b.restoreKeyed(ctx, job{tool: tool, name: name, rec: rec, target: target}, key, nil, start)
}

// restoreKeyed is restore once the key (or the error computing it) is
// known; start is when the restore began, for its time.
func (b *Builder) restoreKeyed(ctx context.Context, j job, key stash.Key, err error, start time.Time) bool {
	tool, name, rec, target := j.tool, j.name, j.rec, j.target
	var got stash.Restored
	if err == nil {
		// The phase a detached heal's record shows: the calls waiting for
		// it say a restore runs, not a build (guard.doing).
		rep := progress.Start(b.stderr(), "restoring "+name, 0, b.Pace)
		rep.SetStatus(restoring(rec))
		got, err = b.Stash.Restore(ctx, rec.Name, key, rec.Dir, rec.Outputs, rec.StashFrom)
		rep.Stop("")
	}
	if err == nil {
		if h := CheckBinary(target, b.StampDir(), b.libraryPath()); !h.OK {
			err = fmt.Errorf("%s is still %s after the restore", target, h.Reason)
		}
	}
	ev := heallog.Event{Event: heallog.BinaryRestore, Tool: tool, Target: target, Result: "ok", Bytes: got.Bytes, DurationMS: time.Since(start).Milliseconds()}
	switch {
	case err == nil:
		ev.Reason = "from " + got.From
		// A heal that restores is when a push that failed is made again:
		// never on a healthy call.
		if _, started, perr := b.RetryPush(rec); started || perr != nil {
			b.pushNote(name, rec, perr)
		}
		fmt.Fprintf(b.stderr(), "guard: restored %s from %s in %s (%s, a %s entry); no build needed\n",
			name, got.From, time.Since(start).Round(10*time.Millisecond), units.Count(got.Files, "file", "files"), units.Bytes(got.Bytes))
	case errors.Is(err, stash.ErrNoEntry):
		ev.Result, ev.Reason = "miss", "no entry matches"
		fmt.Fprintf(b.stderr(), "guard: no stash entry of %s matches its sources, steps, compilers and CPU; building\n", name)
	default:
		ev.Level, ev.Result, ev.Reason = "warn", "failed", units.OneLine(err)
		fmt.Fprintf(b.stderr(), "guard: cannot restore %s from the stash (%s); building\n", name, units.OneLine(err))
	}
	b.event(ev)
	return err == nil
}

// restoring is the phase of a restore of rec: "restoring from the stash",
// then the stash_from sources it may ask, passwords left out.
func restoring(rec *manifest.Build) string {
	s := "restoring from the stash"
	for _, src := range rec.StashFrom {
		s += " or " + stash.Redact(src)
	}
	return s
}

// stashBuild keeps what a good build of j's recipe made: the binaries of
// the manifest's tools built by it that are healthy, and the libraries
// they load from its output folders. It keys the entry anew, after the
// build, and stashes nothing when the sources changed during it (before
// is the key restore computed, if it did). A failure is said on stderr
// and never fails the build. It reports whether the stash_to push started
// holding the fleet's lease this build held (fleet.go).
func (b *Builder) stashBuild(ctx context.Context, j job, before stash.Key) bool {
	name, rec := j.name, j.rec
	if b.Stash == nil {
		return false
	}
	key, err := b.StashKey(ctx, rec)
	if err == nil && before.Sum != "" && before.Source != key.Source {
		err = errors.New("the sources changed during the build")
	}
	var it stash.Item
	if err == nil {
		it, err = b.Stash.Save(ctx, rec.Name, key, rec.Dir, rec.Outputs, b.stashPaths(rec, j.target))
	}
	if err != nil {
		fmt.Fprintf(b.stderr(), "guard: the build of %s was not stashed: %s\n", name, units.OneLine(err))
		return false
	}
	note := fmt.Sprintf("stashed %s (%d bytes, key %.12s, source %s)", name, it.Size, it.Key, key.Source)
	if len(it.Pinned) > 0 {
		// One line: the entry restores only at this checkout path.
		more := ""
		if len(it.Pinned) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(it.Pinned)-1)
		}
		line := fmt.Sprintf("the stash entry of %s answers only at %s: %s%s; docs/stash.md says how to make a build relocatable", name, rec.Dir, it.Pinned[0], more)
		fmt.Fprintf(b.stderr(), "guard: %s\n", line)
		note += "; " + line
	}
	leased := false
	if rec.StashTo != "" && b.PushTo != nil {
		// The lease was taken for the key before the build: the push of
		// another key's entry does not publish what the fleet waits for.
		leaseID := ""
		if held := j.fleet.held; held != nil && it.Key == j.fleet.key {
			leaseID = held.Record().ID
		}
		// In the background: a registry that is slow or down never
		// slows or fails the heal (docs/registry.md).
		if err := b.PushTo(rec.Name, it.Key, rec.StashTo, leaseID); err != nil {
			note += fmt.Sprintf("; not pushed to %s: %s", rec.StashTo, units.OneLine(err))
		} else {
			note += fmt.Sprintf("; pushing it to %s in the background", rec.StashTo)
			leased = leaseID != ""
		}
	}
	if logf, err := openLog(b.LogPath(name)); err == nil {
		fmt.Fprintf(logf, "== guard: %s\n", note)
		logf.Close()
	}
	return leased
}

// RetryPush starts again, in the background, the stash_to push of rec's
// entry that failed or never ran to its end (stash.PendingPush), to the
// recipe's stash_to of now. It returns the pending push and whether one
// was started; nothing waits when the recipe has no stash_to.
func (b *Builder) RetryPush(rec *manifest.Build) (stash.PendingPush, bool, error) {
	if b.Stash == nil || b.PushTo == nil || rec.StashTo == "" {
		return stash.PendingPush{}, false, nil
	}
	p, ok := b.Stash.Pending(rec.Name)
	if !ok {
		return p, false, nil
	}
	if err := b.PushTo(rec.Name, p.Key, rec.StashTo, ""); err != nil {
		return p, false, err
	}
	return p, true, nil
}

// pushNote writes to the recipe's build log that a pending push was
// started again, or why it could not be.
func (b *Builder) pushNote(name string, rec *manifest.Build, err error) {
	note := fmt.Sprintf("pushing the entry of %s not yet pushed to %s again, in the background", name, rec.StashTo)
	if err != nil {
		note = fmt.Sprintf("the entry of %s not yet pushed to %s: cannot start its push: %s", name, rec.StashTo, units.OneLine(err))
	}
	if logf, err := openLog(b.LogPath(name)); err == nil {
		fmt.Fprintf(logf, "== guard: %s\n", note)
		logf.Close()
	}
}

// stashPaths are the binaries to stash, then every file they load; the
// stash keeps those in the recipe's output folders.
func (b *Builder) stashPaths(rec *manifest.Build, target string) []string {
	bins := []string{target}
	if b.Tools != nil {
		bins = b.Tools(rec.Name)
	}
	var paths, libs []string
	for _, bin := range bins {
		if !CheckBinary(bin, b.StampDir(), b.libraryPath()).OK {
			continue
		}
		paths = append(paths, bin)
		found, _ := Libraries(bin, b.libraryPath())
		libs = append(libs, found...)
	}
	return append(paths, libs...)
}
