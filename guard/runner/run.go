package runner

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// Run runs the tool as a supervised child and returns what happened. It ends
// the run itself when the budget, the stall watchdog, the prompt watchdog or
// ctx (the caller's overall cap) says so, and forwards SIGINT, SIGTERM and
// SIGHUP that guard receives meanwhile to the child's group.
func Run(ctx context.Context, s Spec) Result {
	s = s.withDefaults()
	began := time.Now()
	if err := ctx.Err(); err != nil {
		return Result{Outcome: TimedOut, Err: err}
	}

	// Listen before the child exists, so that a signal arriving during the
	// start is forwarded rather than lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	w := newWatcher(began, s.Capture)
	c, err := startChild(runCtx, s, w)
	if err != nil {
		r := Result{Outcome: StartFailed, Err: err, Elapsed: time.Since(began)}
		select {
		case sig := <-sigs: // caught during the start: guard was asked to stop
			if n, ok := sig.(syscall.Signal); ok {
				r.Outcome, r.Signal = Interrupted, n
			}
		default:
		}
		return r
	}
	defer c.abort()

	sv := &supervisor{s: s, c: c, w: w}
	sv.killNow = func() { sv.killed.Store(true); cancelRun() }
	sv.loop(ctx, sigs)
	return sv.result(began)
}

// supervisor watches one child until it exits. Only the loop goroutine
// touches its fields.
type supervisor struct {
	s       Spec
	c       *child
	w       *watcher
	killNow func()      // exec then calls Cancel: SIGKILL to the group
	killed  atomic.Bool // killNow ran: guard, not the tool, ended the run

	ended    bool // guard decided to end the run
	outcome  Outcome
	signal   syscall.Signal
	err      error
	prompt   string
	answered []string
	killer   *time.Timer
	state    *os.ProcessState
	waitErr  error
}

func (sv *supervisor) loop(ctx context.Context, sigs <-chan os.Signal) {
	exited := make(chan struct{})
	go func() {
		waitExit(sv.c.pid)
		close(exited)
	}()

	var budget <-chan time.Time
	if sv.s.Budget > 0 {
		t := time.NewTimer(sv.s.Budget)
		defer t.Stop()
		budget = t.C
	}
	var tick <-chan time.Time
	if d := sv.s.tick(); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		tick = t.C
	}
	done := ctx.Done()

wait:
	for {
		select {
		case <-exited:
			break wait
		case <-done:
			done = nil // a closed channel would fire forever
			sv.end(TimedOut)
			if sv.outcome == TimedOut && sv.err == nil {
				sv.err = ctx.Err()
			}
		case <-budget:
			sv.end(TimedOut)
		case sig := <-sigs:
			sv.interrupt(sig)
		case now := <-tick:
			sv.watch(now)
		}
	}

	// The child has exited but is not reaped yet, so its process group id
	// cannot have been reused: kill whatever is left in the group.
	sv.c.takeTerminal()
	if sv.ended {
		_ = sv.c.signal(syscall.SIGKILL)
	}
	if sv.killer != nil {
		sv.killer.Stop()
	}
	sv.c.release(drainDelay)
	sv.state, sv.waitErr = sv.c.wait()

	// A signal that came while the child was exiting still means guard was
	// asked to stop: the caller must not go on to the next attempt.
	select {
	case sig := <-sigs:
		sv.interrupt(sig)
	default:
	}
}

// end starts ending the run for reason: SIGTERM to the group (with SIGCONT,
// so that a stopped group can act on it), SIGKILL after the grace period.
// Only the first reason counts.
func (sv *supervisor) end(reason Outcome) {
	if sv.ended {
		return
	}
	sv.ended = true
	sv.outcome = reason
	_ = sv.c.signal(syscall.SIGTERM)
	_ = sv.c.signal(syscall.SIGCONT)
	sv.killer = time.AfterFunc(sv.s.Grace, sv.killNow)
}

// interrupt forwards a signal guard received to the group. It overrides any
// other reason to end: guard itself is being stopped, so the caller must
// stop too. The group still gets the grace period, then SIGKILL.
func (sv *supervisor) interrupt(s os.Signal) {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return
	}
	_ = sv.c.signal(sig)
	sv.outcome, sv.signal, sv.err = Interrupted, sig, nil
	if !sv.ended {
		sv.ended = true
		sv.killer = time.AfterFunc(sv.s.Grace, sv.killNow)
	}
}

func (sv *supervisor) watch(now time.Time) {
	if sv.ended {
		return
	}
	if sv.s.Stall > 0 && sv.w.sinceProgress(now) >= sv.s.Stall {
		sv.end(Stalled)
		return
	}
	if sv.s.Prompts != PromptsOff {
		sv.checkPrompt(now)
	}
}

// checkPrompt answers or kills on a prompt the tool is waiting on. Only a
// yes/no question is ever answered, and only under PromptsAnswer; any other
// policy value is treated as PromptsKill.
func (sv *supervisor) checkPrompt(now time.Time) {
	p, ok := sv.w.prompt(now, sv.s.PromptQuiet)
	if !ok {
		return
	}
	sv.prompt = p.text
	if sv.s.Prompts == PromptsAnswer && p.kind == yesNoPrompt &&
		sv.c.answer(yesReply(p.text, sv.c.enter)) {
		sv.answered = append(sv.answered, p.text)
		sv.w.answered(p)
		return
	}
	sv.end(PromptKilled)
}

func (sv *supervisor) result(began time.Time) Result {
	out, n := sv.w.stdout()
	r := Result{
		Stdout:   out,
		StdoutN:  n,
		Prompt:   sv.prompt,
		Answered: sv.answered,
		Pid:      sv.c.pid,
		Err:      sv.err,
	}
	if st := sv.state; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Outcome, r.Signal = Signaled, ws.Signal()
		} else {
			r.Outcome, r.Code = Exited, st.ExitCode()
		}
	} else {
		// Not reachable with a started child; never report success for it.
		r.Outcome, r.Err = StartFailed, fmt.Errorf("wait %s: %w", sv.s.Path, sv.waitErr)
	}
	if sv.ended {
		ended := r.Outcome
		r.Outcome = sv.outcome
		if sv.outcome == Interrupted {
			// The tool's own answer to the forwarded signal is the call's,
			// unless guard had to kill it after the grace period.
			r.Own = ended == Exited || (ended == Signaled && !sv.killed.Load())
			if ended == Signaled {
				r.Code = 128 + int(r.Signal)
			}
			r.Signal = sv.signal
		} else if r.Signal != 0 {
			r.Signal = 0 // guard's own kill, not news for the caller
		}
	}
	r.Elapsed = time.Since(began)
	return r
}
