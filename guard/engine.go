package guard

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/promptcache"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/guard/sign"
	"github.com/sandbox-guard/guard/guard/speed"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// Engine is one guard process at work on a Config: it resolves, heals, runs
// and logs. The heal log is opened on the first event, so a healthy call
// never touches it.
type Engine struct {
	c   *Config
	log *heallog.Log
	// pace is how the heals' progress is told: lines every
	// GUARD_PROGRESS_EVERY, or a detached heal's job record (RunJob).
	pace progress.Pace

	// The engine's reach beyond files, replaced by unit tests so that the
	// call path runs without starting a process.
	exec     func(path string, argv, env []string) error      // become the tool
	run      func(context.Context, runner.Spec) runner.Result // a supervised child
	binaries binaryHealer                                     // build recipes and Debian packages
	jobs     detacher                                         // heals that outlive the call

	// The collaborators over guard's state folder, each built once, on
	// its first use (New), so that a healthy call builds only what it
	// uses. They are shared: a caller that changes one works on a copy.
	models   func() *models.Healer
	stash    func() *stash.Store
	registry func() *registry.Client
	speeds   func() *speed.Store
	prompts  func() *promptcache.Store
}

// binaryHealer brings back a tool's executable: builds.Builder.
type binaryHealer interface {
	Build(ctx context.Context, tool string, rec *manifest.Build, target string) error
	// RestoreNow brings rec's build back from a matching entry of the
	// stash in this process, when that is all it takes; false: heal the
	// usual way (Build).
	RestoreNow(ctx context.Context, tool string, rec *manifest.Build, target string) bool
	InstallPackages(ctx context.Context, tool string, pkgs []string) error
}

// New returns the engine for c; Close flushes its log.
func New(c *Config) *Engine {
	log := heallog.New(c.LogPath, c.Stderr)
	log.Fallback = c.LogFallback
	log.Install = installMark(c.StateDir)
	e := &Engine{c: c, log: log, exec: runner.Exec, run: runner.Run, pace: progress.Pace{Every: c.ProgressEvery}}
	e.wire()
	e.jobs = spawner{c}
	return e
}

// wire makes the collaborators anew, each built on its first use.
func (e *Engine) wire() {
	e.models = sync.OnceValue(func() *models.Healer { return newModels(e) })
	e.stash = sync.OnceValue(func() *stash.Store { return newStash(e) })
	e.registry = sync.OnceValue(func() *registry.Client { return newRegistry(e) })
	e.speeds = sync.OnceValue(func() *speed.Store { return newSpeeds(e) })
	e.prompts = sync.OnceValue(func() *promptcache.Store { return newPromptCache(e) })
	e.binaries = e.builder()
}

// observeProgress sends the progress of every later heal of this engine
// to f instead of lines: a detached heal's job record, which the call that
// waits on it draws. The collaborators carry the pace they were made with,
// so they are made again.
func (e *Engine) observeProgress(f func(progress.Snapshot)) {
	e.pace.Observe = f
	e.wire()
}

// Config is the configuration the engine works on.
func (e *Engine) Config() *Config { return e.c }

// Close flushes the heal log and lets go of the manifest's decoded file.
func (e *Engine) Close() {
	e.log.Close()
	e.c.M.Close()
}

// LogPath is the heal log events go to: the configured one, or the per-user
// fallback when the shared default belongs to another user.
func (e *Engine) LogPath() string { return heallog.Where(e.c.LogPath, e.c.LogFallback) }

// Install is the mark this install's heal events carry (heallog.Log's
// Install): its state folder, absolute. guard status shows the events
// with this mark.
func (e *Engine) Install() string { return e.log.Install }

// installMark is the state folder made absolute: what tells one install
// from another in the shared heal log.
func installMark(stateDir string) string {
	if stateDir == "" {
		return "" // no state folder: nothing to tell this install by
	}
	if abs, err := filepath.Abs(stateDir); err == nil {
		return abs
	}
	return stateDir
}

// Event logs one heal event; the log file is opened on the first one.
func (e *Engine) Event(ev heallog.Event) { e.log.Write(ev) }

// Say prints a message for a person on stderr, in guard's voice.
func (e *Engine) Say(format string, a ...any) {
	Tell(e.c.Stderr, fmt.Sprintf(format, a...))
}

// debug prints one decision of the call on stderr when GUARD_DEBUG=1 or
// --verbose asked for them. On the healthy path callers test e.c.Debug
// first, so that not even the arguments are made.
func (e *Engine) debug(format string, a ...any) {
	if e.c.Debug {
		Tell(e.c.Stderr, "debug: "+fmt.Sprintf(format, a...))
	}
}

// Tell writes msg for a person on w with every line starting "guard: ",
// so a hint on a line of its own still reads as guard's.
func Tell(w io.Writer, msg string) {
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		fmt.Fprintln(w, "guard: "+line)
	}
}

// Repair checks every link of the shim folder and brings back those a
// sandbox evicted; it logs shim.recreate for each. The commands run it
// every time; a call only when the folder changed (mendShims).
func (e *Engine) Repair() {
	c := e.c
	done, err := install.Repair(c.ShimDir, c.StateDir, c.Self, c.M.ToolNames(), c.M.Generation())
	for _, name := range done {
		e.Event(heallog.Event{Event: heallog.ShimRecreate, Tool: name, Target: filepath.Join(c.ShimDir, name), Result: "ok"})
	}
	if err != nil {
		e.Event(heallog.Event{Level: "warn", Event: heallog.ShimRecreate, Target: c.ShimDir, Result: "failed", Reason: err.Error()})
		e.Say("could not mend the shim folder %s: %v", c.ShimDir, err)
	}
}

// mendShims is a call's Repair: only when the shim folder, guard's copy
// in it or the manifest changed since the last full check, so a healthy
// call costs the same with 3 tools or 10,000.
func (e *Engine) mendShims() {
	c := e.c
	if install.Unchanged(c.ShimDir, c.StateDir, c.M.Generation()) {
		return
	}
	e.debug("shims: the folder or the manifest changed since the last check: checking every link")
	e.Repair()
}

// builder is the build and package healer over guard's state folder.
func (e *Engine) builder() *builds.Builder {
	return &builds.Builder{
		StateDir:    e.c.StateDir,
		Log:         e.Event,
		Stderr:      e.c.Stderr,
		Package:     e.c.M.Package,
		HealTimeout: e.c.M.Budget.Heal.D(),
		Grace:       e.c.M.Budget.Grace.D(),
		Env:         e.c.Env,
		Pace:        e.pace,
		Stash:       e.Stash(),
		Tools:       e.toolsBuiltBy,
		PushTo:      e.pushInBackground,
		Fleet:       e.fleet(e.canSign),
	}
}

// fleet is how a healer reaches the fleet's leases (docs/fleet-lease.md);
// canPublish says whether this sandbox can publish what it would make.
func (e *Engine) fleet(canPublish func() bool) *lease.Fleet {
	return &lease.Fleet{Period: e.c.M.Stash.Lease.D(), Board: e.leaseBoard, CanPublish: canPublish}
}

// leaseBoard is the board of the fleet's leases in the registry dest
// (docs/fleet-lease.md).
func (e *Engine) leaseBoard(dest string) (lease.Board, error) {
	ref, err := registry.Parse(dest)
	if err != nil {
		return nil, err
	}
	repo, err := e.Registry().Open(ref)
	if err != nil {
		return nil, err
	}
	return lease.OnRegistry(repo), nil
}

// canSign says whether this sandbox has the key that signs what it
// pushes: only one that can publish its build holds the fleet's lease.
func (e *Engine) canSign() bool {
	_, err := sign.ReadSecretFile(e.StashSecretKey())
	return err == nil
}

// pushInBackground starts `guard stash push --entry KEY RECIPE DEST` in a
// session of its own, at low priority, its output in the recipe's push
// log (STATE/stash/push-RECIPE.log, the last push's, appended to so that
// an older push still running leaves no hole), and does not wait for it:
// a build's stash_to (docs/registry.md). The push is marked pending
// first: until it succeeds, a heal that restores the recipe and `guard
// heal` start it again.
func (e *Engine) pushInBackground(recipe, key, dest, leaseID string) error {
	store := e.Stash()
	if err := store.MarkPending(recipe, key, dest); err != nil {
		return err
	}
	argv := []string{"guard", "stash", "push", "--entry", key}
	if leaseID != "" {
		argv = append(argv, "--lease", leaseID) // the push lets go of the fleet's lease
	}
	return e.spawnLogged(store.PushLog(recipe), append(argv, recipe, dest))
}

// spawnLogged starts argv (guard's own command) in a session of its own,
// at low priority, its output in logPath, emptied first (appended to, so
// that an older run still writing leaves no hole), and does not wait.
func (e *Engine) spawnLogged(logPath string, argv []string) error {
	logf, err := state.OpenOwn(logPath, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if err := logf.Truncate(0); err != nil {
		return err
	}
	_, err = healjob.Spawn(e.c.Self, argv, e.c.Env, logf)
	return err
}

// RetryPush starts again, in the background, the stash_to push of rec's
// entry that has not been made yet (stash.PendingPush), and returns it;
// false when none waits.
func (e *Engine) RetryPush(rec *manifest.Build) (stash.PendingPush, bool, error) {
	return e.builder().RetryPush(rec)
}

// newModels is the model healer Models returns.
func newModels(e *Engine) *models.Healer {
	return &models.Healer{
		StateDir:    e.c.StateDir,
		Log:         e.Event,
		Stderr:      e.c.Stderr,
		HealTimeout: e.c.M.Budget.Heal.D(),
		Token:       e.c.HFToken,
		Pace:        e.pace,
		Registry:    e.Registry(),
		Fleet:       e.fleet(nil),
		PushTo:      e.pushModelInBackground,
	}
}

// pushModelInBackground starts `guard model push --lease ID PATH DEST` in
// a session of its own, at low priority, its output in the model's push
// log (STATE/jobs/push-model-KEY.log), and does not wait for it: a
// model's push_to (docs/fleet-lease.md).
func (e *Engine) pushModelInBackground(path, dest, leaseID string) error {
	key := "push-model-" + state.PathKey(path)
	if err := os.MkdirAll(e.c.State().Jobs(), 0o700); err != nil { // a heal in the foreground made none
		return err
	}
	return e.spawnLogged(healjob.LogPath(e.c.StateDir, key), []string{"guard", "model", "push", "--lease", leaseID, path, dest})
}

// newSpeeds is the store of speeds Speeds returns.
func newSpeeds(e *Engine) *speed.Store {
	host, _ := os.Hostname()
	return &speed.Store{Path: e.c.State().Speeds(), Machine: host}
}

// newPromptCache is the prompt cache PromptCache returns.
func newPromptCache(e *Engine) *promptcache.Store {
	return &promptcache.Store{Dir: e.c.State().Prompts(), MaxBytes: e.c.M.Cache.MaxBytes, TTL: e.c.M.Cache.TTL.D()}
}

// Stash is the stash of builds in guard's state folder, shared by every
// use: change a copy.
func (e *Engine) Stash() *stash.Store { return e.stash() }

// newStash is the stash Stash returns.
func newStash(e *Engine) *stash.Store {
	// The manifest's keys were checked when it was read: one that is not
	// a key is reported there, not trusted here.
	trusted, _ := sign.ParseTrusted(e.c.M.Stash.TrustedKeys)
	return &stash.Store{Dir: e.c.State().Stash(), MaxBytes: e.c.M.Stash.MaxBytes, Trusted: trusted, Registry: e.Registry()}
}

// Registry is the client of the OCI registries the manifest names, with
// a timeout per request that keeps a registry that is down or slow from
// holding a heal (docs/registry.md). It is shared by every use.
func (e *Engine) Registry() *registry.Client { return e.registry() }

// newRegistry is the registry client Registry returns.
func newRegistry(e *Engine) *registry.Client {
	return &registry.Client{PlainHTTP: e.c.M.Registry.PlainHTTP, Timeout: registryTimeout}
}

// registryTimeout bounds each registry request but a blob's body.
const registryTimeout = 15 * time.Second

// StashSecretKey is the file of the key that signs exported entries:
// [stash] secret_key, else ~/.config/guard/stash.sec.
func (e *Engine) StashSecretKey() string {
	return cmp.Or(e.c.M.Stash.SecretKey, filepath.Join(filepath.Dir(manifest.UserPath(e.c.Home)), "stash.sec"))
}

// StashKey is the key a build of rec would be stashed under now.
func (e *Engine) StashKey(ctx context.Context, rec *manifest.Build) (stash.Key, error) {
	return e.builder().StashKey(ctx, rec)
}

// toolsBuiltBy lists the paths of the manifest's tools that recipe builds
// (a lazy manifest reads every tool: this runs only after a build).
func (e *Engine) toolsBuiltBy(recipe string) []string {
	var paths []string
	for _, name := range e.c.M.ToolNames() {
		if t := e.c.M.Tool(name); t != nil && t.Build == recipe && t.Path != "" {
			paths = append(paths, t.Path)
		}
	}
	return paths
}

// BuildLog is where build recipe name writes its output.
func (e *Engine) BuildLog(name string) string { return e.builder().LogPath(name) }
