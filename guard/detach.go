package guard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/state"
)

// A heal a call needs runs detached (healjob): the call waits for it
// within what is left of its budget, and the heal goes on past it, stopped
// only by its own limit (docs/healing-in-the-background.md). `guard heal`
// in the foreground heals in its own process, as does the detached heal.

// jobSpec is what one detached heal brings back: a tool's executable (its
// build recipe or package) or a model file at a path. Its text form is
// the argument of `guard heal --job`.
type jobSpec struct {
	kind healjob.Kind // KindTool or KindModel
	name string       // the tool's name, or the model file's absolute path
	// caller is the tool whose call started the heal: its events name it
	// (`guard heal --job SPEC --for TOOL`). "" names `guard heal`.
	caller string
}

func (s jobSpec) String() string { return string(s.kind) + ":" + s.name }

// parseJobSpec reads `guard heal --job`'s argument.
func parseJobSpec(arg string) (jobSpec, error) {
	kind, name, _ := strings.Cut(arg, ":")
	if (kind != string(healjob.KindTool) && kind != string(healjob.KindModel)) || name == "" {
		return jobSpec{}, fmt.Errorf("heal --job %q: want tool:NAME or model:PATH", arg)
	}
	return jobSpec{kind: healjob.Kind(kind), name: name}, nil
}

// detacher starts the heal of spec so that it outlives the call; the job's
// claim j is handed to it, and it writes the job's result.
type detacher interface {
	detach(j *healjob.Job, spec jobSpec) error
}

// spawner is the detacher of a real call: `guard heal --job SPEC` from
// guard's own executable, given the job's lock as its fd 3.
type spawner struct{ c *Config }

func (s spawner) detach(j *healjob.Job, spec jobSpec) error {
	logPath := healjob.LogPath(s.c.StateDir, j.Record().Key)
	logf, err := state.OpenOwn(logPath, os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", logPath, err)
	}
	defer logf.Close()
	argv := []string{"guard", "heal", "--job", spec.String()}
	if spec.caller != "" {
		argv = append(argv, "--for", spec.caller)
	}
	pid, err := healjob.Spawn(s.c.Self, argv, s.c.Env, logf, j.Lock())
	if err != nil {
		return err
	}
	j.SetPID(pid)
	j.Close() // the lock is the detached heal's now
	return nil
}

// finishJob writes the heal's result to its job. A heal stopped by a
// signal did not fail: like a killed one it leaves no result, so that a
// call waiting for it starts it again rather than call the tool
// unhealable (127). It reports whether it wrote a result.
func finishJob(j *healjob.Job, err error) bool {
	if _, ok := interrupted(err); ok {
		return false
	}
	return j.Finish(err) == nil
}

// jobLockFD is where the detached heal finds the job's lock.
const jobLockFD = 3

// jobRecord is the first record of spec's job: its key, what it heals,
// and the time left as the last good build of its kind here says.
func (e *Engine) jobRecord(spec jobSpec) (healjob.Record, error) {
	// The heal's own limit, for a waiter to tell a stopped or stuck heal
	// (healjob.Record.Stale): [budget] heal, a build's timeout for a build.
	r := healjob.Record{LeftMS: -1, Percent: -1, LimitMS: e.c.M.Budget.Heal.D().Milliseconds()}
	if spec.kind == healjob.KindModel {
		r.Key, r.What, r.Names = healjob.Key(healjob.KindModel, spec.name), "the download of "+filepath.Base(spec.name), []string{filepath.Base(spec.name)}
		return r, nil
	}
	tool := e.c.M.Tool(spec.name)
	switch {
	case tool == nil:
		return r, fmt.Errorf("no tool named %q in the manifest", spec.name)
	case tool.Build != "":
		r.Key, r.What = healjob.Key(healjob.KindBuild, tool.Build), "the build of "+tool.Build
		if b := e.c.M.Build(tool.Build); b != nil {
			if took, ok := builds.Expected(e.c.StateDir, b); ok {
				r.LeftMS = took.Milliseconds() // a build from nothing: the last from nothing
			}
			if b.Timeout > 0 {
				r.LimitMS = b.Timeout.D().Milliseconds()
			}
		}
	case tool.Package != "":
		r.Key, r.What = healjob.Key(healjob.KindPackage, tool.Package), "the install of package "+tool.Package
	default:
		r.Key, r.What = healjob.Key(healjob.KindTool, tool.Name), "the heal of "+tool.Name
	}
	r.Names = []string{tool.Name}
	return r, nil
}

// healDetached brings back what spec heals through a detached heal: it
// starts one, or finds one running for the same thing (a second call never
// starts a second build), and waits for it within ctx, showing its
// messages and progress. nil means the heal ended well; the caller looks
// again. A wait cut short is a *healingError (the budget) or an
// *interruptedError (a signal); the heal goes on either way. here is the
// heal in this process, for when none can be detached.
func (e *Engine) healDetached(ctx context.Context, caller string, spec jobSpec, here func(context.Context) error) error {
	rec, err := e.jobRecord(spec)
	if err != nil {
		return err
	}
	for try := 0; ; try++ {
		j, err := healjob.Claim(e.c.StateDir, rec)
		switch {
		case err == nil:
			if derr := e.jobs.detach(j, spec); derr != nil {
				// No detached heal (guard's own file is gone, a sandbox
				// refuses a session): heal here, as before.
				e.Say("%s: could not heal in the background (%v); healing in this call", caller, derr)
				herr := here(ctx)
				finishJob(j, herr)
				j.Close()
				return herr
			}
		case errors.Is(err, healjob.ErrRunning):
			if s, ok := healjob.Look(e.c.StateDir, rec.Key); ok && s.Alive {
				e.Say("%s: %s is running in the background (pid %d, %s); waiting for it", caller, doing(s.Record), s.PID, s.Where())
			}
		default:
			// The jobs folder cannot be written: heal here, as before.
			e.debug("%s: no job record (%v); healing in this call", caller, err)
			return here(ctx)
		}
		s, err := e.follow(ctx, rec)
		if err != nil {
			return err
		}
		switch {
		case s.Result == healjob.OK:
			return nil
		case s.Result == healjob.Later:
			return &healingError{rec: s.Record, later: s.Message}
		case s.Done():
			return errors.New(s.Message)
		case try == 0:
			e.Say("%s: %s (pid %d) ended without a result; starting it again", caller, rec.What, s.PID)
			continue
		}
		return fmt.Errorf("%s (pid %d) ended twice without a result; see %s", rec.What, s.PID, healjob.LogPath(e.c.StateDir, rec.Key))
	}
}

// follow waits for the job's heal, with its messages and a progress line,
// until it ends, ctx ends or it plainly cannot end in time.
func (e *Engine) follow(ctx context.Context, rec healjob.Record) (healjob.Status, error) {
	rep := progress.Start(e.c.Stderr, "waiting for "+rec.What, 0, e.pace)
	began := time.Now()
	var s healjob.Status
	err := underSignals(ctx, func(ctx context.Context) error {
		var err error
		s, err = healjob.Follow(ctx, e.c.StateDir, rec.Key, e.c.Stderr, func(s healjob.Status) error {
			rep.Show(s.Snapshot())
			if cannotFit(ctx, s.Left()) {
				return errCannotFit
			}
			return nil
		})
		return err
	})
	rep.Stop("")
	if s.Key == "" {
		s.Record = rec
	}
	var ie *interruptedError
	switch {
	case errors.As(err, &ie):
		ie.goesOn = s.What + " goes on in the background; follow it: " + waitCommand(s.Record)
		return s, err
	case errors.Is(err, errCannotFit), errors.Is(err, context.DeadlineExceeded):
		return s, &healingError{rec: s.Record, waited: time.Since(began), cannotFit: errors.Is(err, errCannotFit)}
	case errors.Is(err, healjob.ErrStuck):
		return s, &healingError{rec: s.Record, waited: time.Since(began), stuck: stuckReason(s, time.Now())}
	}
	return s, err
}

// healingError says a heal the call needs goes on in the background past
// what the call could wait for it: its budget ran out during the wait, or
// the heal's own estimate already showed it could not end in what was
// left. Exit 75 (EX_TEMPFAIL): call again later, or wait with guard heal
// --wait. It is one line: what heals, how far, the time left, the limit
// that stopped the wait and the command that waits.
type healingError struct {
	rec       healjob.Record
	waited    time.Duration
	cannotFit bool
	limit     string // the call's budget and what set it: "4.0s (GUARD_TIMEOUT)"; set by budget.during
	leftFor   string // the later attempt the wait left its time to, if any: "python3's planned 2.0s"
	// stuck says why the call stopped waiting for a heal that is stopped
	// or stuck (healjob.ErrStuck), and what to do about it; "" otherwise.
	stuck string
	// later is the message of a heal that ended for a trouble that
	// passes (healjob.Later: a download whose sources stalled); "" otherwise.
	later string
}

// stuckReason is the line's middle for a heal whose record went stale:
// stopped (its process is in state T) or stuck, and what ends the wait for
// good.
func stuckReason(s healjob.Status, now time.Time) string {
	pid := strconv.Itoa(s.PID)
	since := secs(now.Sub(s.Updated).Round(time.Second))
	if s.Stopped() {
		return "is stopped (pid " + pid + " is in state T: SIGSTOP or SIGTSTP) and its record was last updated " + since +
			" ago, longer than its own limit of " + secs(s.Limit()) + ": not waiting for it; continue it: kill -CONT " + pid +
			", or end it: kill -KILL " + pid + " (the next call starts it again)"
	}
	return "is stuck: its record was last updated " + since + " ago, longer than its own limit of " + secs(s.Limit()) +
		", which should have ended it: not waiting for it; end it: kill -KILL " + pid + " (the next call starts it again)"
}

func (e *healingError) Error() string {
	if e.later != "" {
		return e.later + "; call again later, or run: guard heal " + strings.Join(e.rec.Names, " ")
	}
	if e.stuck != "" {
		return fmt.Sprintf("%s (%s) %s", e.rec.What, e.rec.Where(), e.stuck)
	}
	why := "the call's budget of " + e.limit + " ran out after " + secs(e.waited) + " of waiting"
	switch {
	case e.cannotFit && e.leftFor != "":
		why = "it cannot end within what is left of the call's budget of " + e.limit + " less " + e.leftFor
	case e.cannotFit:
		why = "it cannot end within what is left of the call's budget of " + e.limit
	case e.leftFor != "":
		why = "the call stopped waiting after " + secs(e.waited) + " to leave " + e.leftFor + " of its budget of " + e.limit + ", and no attempt answered"
	}
	return fmt.Sprintf("%s goes on in the background (%s): %s; wait for it: %s, or call again later",
		doing(e.rec), e.rec.Where(), why, waitCommand(e.rec))
}

// doing is what a heal in the background is doing now: a build's heal
// that is restoring from the stash or a stash_from source says so (its
// phase, set by the builder), not that a build runs.
func doing(r healjob.Record) string {
	if lease.WaitingPhase(r.Phase) {
		return r.What + ", " + r.Phase // another sandbox holds the fleet's lease (docs/fleet-lease.md)
	}
	if from, ok := strings.CutPrefix(r.Phase, "restoring "); ok {
		if name, ok := strings.CutPrefix(r.What, "the build of "); ok {
			return "the restore of " + name + " " + from
		}
	}
	return r.What
}

// cannotFit reports whether a heal whose own estimate of its time left is
// left (-1: unknown) cannot end within ctx. Only a known time left can say
// so: an unknown one past a deadline already gone (a loaded machine polls
// late) is the budget running out, and the call says that instead.
func cannotFit(ctx context.Context, left time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && left >= 0 && left > time.Until(dl)
}

// errCannotFit is a wait stopped because the heal's own estimate of the
// time it needs is more than the call has left.
var errCannotFit = errors.New("the heal cannot end within the call's budget")

// waitCommand is the command that waits for a job's heal.
func waitCommand(r healjob.Record) string {
	return "guard heal --wait " + strings.Join(r.Names, " ")
}

// WaitHeals is `guard heal --wait`'s wait: it follows every detached heal
// running for names (all of them when none), with its messages and
// progress and no call's budget, until each ends, and says how many it
// followed. A heal that failed is an error; a signal ends the wait (the
// heals go on), and so does a heal that is stopped or stuck (a
// *healingError: exit 75).
func (e *Engine) WaitHeals(ctx context.Context, names []string) (followed int, err error) {
	var failed []string
	for _, s := range healjob.List(e.c.StateDir) {
		if !s.Alive || !wanted(s.Names, names) {
			continue
		}
		e.Say("waiting for %s (pid %d, %s)", doing(s.Record), s.PID, s.Where())
		followed++
		end, err := e.follow(ctx, s.Record)
		if err != nil {
			return followed, err
		}
		switch {
		case end.Result == healjob.OK:
			e.Say("%s ended well after %s", end.What, secs(end.End.Sub(end.Start)))
		case end.Done():
			failed = append(failed, end.What+": "+end.Message)
		default:
			failed = append(failed, end.What+" ended without a result (killed?)")
		}
	}
	if len(failed) > 0 {
		return followed, errors.New(strings.Join(failed, "\n"))
	}
	return followed, nil
}

// wanted reports whether a job healing have is one of names (all when
// names is empty).
func wanted(have, names []string) bool {
	return len(names) == 0 || slices.ContainsFunc(have, func(h string) bool { return slices.Contains(names, h) })
}
