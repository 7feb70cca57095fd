package runner

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
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

	w := newWatcher(began, s)
	c, err := startChild(s, w)
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
	sv.loop(ctx, sigs)
	return sv.result(began)
}

// supervisor watches one child until it exits. Only the loop goroutine
// touches its fields, but for killed.
type supervisor struct {
	s      Spec
	c      *child
	w      *watcher
	killed atomic.Bool // guard SIGKILLed the group after the grace period

	ended    bool // guard decided to end the run
	outcome  Outcome
	signal   syscall.Signal
	err      error
	prompt   string
	answered []Answer
	// askedAgainN counts the answers in a row to a question asked again
	// at once (see askedAgain).
	askedAgainN int
	killer      *time.Timer
	status      unix.WaitStatus
	waitErr     error

	budget     *time.Timer
	deadline   time.Time     // when the budget runs out; moved on by a stop
	stoppedFor time.Duration // time the child spent stopped, all stops together
}

// childEvent is what watchChild saw: the child stopped (by stopSignal) or
// exited.
type childEvent struct {
	exited     bool
	stopSignal syscall.Signal
}

// watchChild reports the child's stops and its exit on events, without
// reaping it, so that its pid, and with it the process group id, stays
// reserved until guard has made sure the group is gone.
func watchChild(pid int, events chan<- childEvent) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err == nil && info.Code == cldStopped {
			// Take the stop off the queue (it would be reported again
			// forever); WNOHANG because the child may have been continued
			// and exited meanwhile.
			_ = unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOHANG, nil)
			events <- childEvent{stopSignal: syscall.Signal(siginfoStatus(&info))}
			continue
		}
		events <- childEvent{exited: true}
		return
	}
}

func (sv *supervisor) loop(ctx context.Context, sigs <-chan os.Signal) {
	events := make(chan childEvent, 1)
	go watchChild(sv.c.pid, events)

	var budget <-chan time.Time
	if sv.s.Budget > 0 {
		sv.deadline = time.Now().Add(sv.s.Budget)
		sv.budget = time.NewTimer(sv.s.Budget)
		defer sv.budget.Stop()
		budget = sv.budget.C
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
		case ev := <-events:
			if ev.exited {
				break wait
			}
			sv.stopped(ev.stopSignal)
		case <-sv.c.suspended():
			// Ctrl-Z typed for a pty child: stop its group as the
			// terminal would have (SIGSTOP: see child.suspendKey).
			if !sv.ended {
				_ = sv.c.signalGroup(syscall.SIGSTOP)
				sv.suspend()
			}
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
	// (and session id) cannot have been reused: kill whatever is left in
	// the group, or in every group of its session.
	sv.c.takeTerminal()
	if sv.ended {
		_ = sv.c.signal(syscall.SIGKILL)
	}
	if sv.killer != nil {
		sv.killer.Stop()
	}
	sv.c.release(drainDelay)
	sv.status, sv.waitErr = sv.c.wait()

	// A signal that came while the child was exiting still means guard was
	// asked to stop: the caller must not go on to the next attempt.
	select {
	case sig := <-sigs:
		sv.interrupt(sig)
	default:
	}
}

// end starts ending the run for reason: SIGTERM to the group, or to every
// group of the tool's session (with SIGCONT,
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
	sv.killer = time.AfterFunc(sv.s.Grace, sv.kill)
}

// kill is the end of the grace period.
func (sv *supervisor) kill() {
	sv.killed.Store(true)
	_ = sv.c.signal(syscall.SIGKILL)
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
		sv.killer = time.AfterFunc(sv.s.Grace, sv.kill)
	}
}

// stopped is the child stopping. At a terminal guard does what a shell's
// job control expects of a wrapper (see suspend); elsewhere nobody could
// continue guard, so it stays running and the budget still counts.
func (sv *supervisor) stopped(sig syscall.Signal) {
	if sv.ended || !sv.c.atTerminal() {
		return
	}
	switch sig {
	case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		sv.suspend()
	}
}

// suspend stops guard with its stopped child, the way a job-control-aware
// wrapper does: the terminal goes back to guard's group (the shell's job)
// and guard stops its group, so the shell sees its job stop and gets its
// prompt back. When guard is continued (fg or bg), the child is given the
// terminal again if guard has it (fg), and its group is continued. The
// time spent stopped does not count against the budget or the watchdogs.
func (sv *supervisor) suspend() {
	stoppedAt := time.Now()
	if sv.budget != nil {
		sv.budget.Stop()
	}
	sv.c.takeTerminal()
	sv.c.raw.restore()

	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	stopSelf()
	// Stopped here until continued; a group the kernel will not stop
	// (orphaned: no shell to continue it) lets guard run on at once.
	select {
	case <-cont:
	case <-time.After(500 * time.Millisecond):
	}
	signal.Stop(cont)

	sv.c.giveTerminal()
	_ = sv.c.signalGroup(syscall.SIGCONT)
	d := time.Since(stoppedAt)
	sv.stoppedFor += d
	sv.w.paused(d)
	if sv.budget != nil {
		sv.deadline = sv.deadline.Add(d)
		sv.budget.Reset(time.Until(sv.deadline))
	}
}

// stopSelf stops guard's process group as the terminal's ^Z would have,
// had guard's child not held the terminal.
func stopSelf() {
	sig := syscall.SIGTSTP
	if signal.Ignored(sig) {
		sig = syscall.SIGSTOP
	}
	_ = unix.Kill(0, sig)
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

// checkPrompt answers or ends the run when the tool waits for input at a
// question. Whether it waits is the kernel's word; the text only says what
// it asks. Where the kernel cannot say, a question the text recognises is
// taken as waited at, as before guard could ask.
func (sv *supervisor) checkPrompt(now time.Time) {
	p, ok := sv.w.prompt(now, sv.s.PromptQuiet, finishedQuiet*sv.s.PromptQuiet)
	if !ok {
		return
	}
	waiting, known := waitsForInput(sv.c.pid, sv.c.stdin)
	if known && !waiting || !known && (p.finished || !p.kind.recognised()) {
		return
	}
	sv.prompt = p.text
	if sv.mayAnswer(p) && !sv.askedAgain(p) {
		reply := yesReply(p.text, sv.c.enter)
		if sv.c.answer(reply) {
			sv.answered = append(sv.answered, Answer{Prompt: p.text, Reply: reply[:len(reply)-len(sv.c.enter)]})
			sv.w.answered(p)
			return
		}
	}
	sv.end(PromptKilled)
}

// finishedQuiet is how many PromptQuiet periods the output must be quiet
// before the last *finished* line is taken as the question a tool waits at
// ("What is your project named?" and a newline, then a read): longer than
// for a line left open, since a filter that printed a line and waits for
// more input from a slow pipe looks the same to the kernel. Only the
// kernel's word counts here, never the text alone.
const finishedQuiet = 5

// maxSameAnswers is how many times in a row guard answers a question the
// tool asks again at once: it did not take the answer, and answering on
// would go on for good.
const maxSameAnswers = 3

// askedAgain counts p if the tool asked it again right after guard
// answered it (nothing else printed but, on a pty, the echo of the answer)
// and reports whether that has happened maxSameAnswers times in a row.
func (sv *supervisor) askedAgain(p promptFound) bool {
	echo := 0
	if sv.c.master != nil {
		echo = 1
	}
	n := len(sv.answered)
	if n > 0 && sv.answered[n-1].Prompt == p.text && p.linesSinceAnswer <= echo {
		sv.askedAgainN++
	} else {
		sv.askedAgainN = 0
	}
	return sv.askedAgainN >= maxSameAnswers
}

// mayAnswer says whether the policy lets guard answer yes to p: only a
// yes/no question, and only one whose default is yes unless the policy is
// PromptsYes.
func (sv *supervisor) mayAnswer(p promptFound) bool {
	if p.kind != yesNoPrompt {
		return false
	}
	switch sv.s.Prompts {
	case PromptsYes:
		return true
	case PromptsAnswer:
		return yesIsDefault(p.text)
	}
	return false
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
		Stopped:  sv.stoppedFor,
	}
	switch ws := sv.status; {
	case sv.waitErr != nil:
		// Not reachable with a started child; never report success for it.
		r.Outcome, r.Err = StartFailed, fmt.Errorf("wait %s: %w", sv.s.Path, sv.waitErr)
	case ws.Signaled():
		r.Outcome, r.Signal = Signaled, ws.Signal()
	default:
		r.Outcome, r.Code = Exited, ws.ExitStatus()
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

// cldStopped is CLD_STOPPED, the si_code of a child that was stopped.
const cldStopped = 5

// siginfoStatus is si_status of a SIGCHLD siginfo: the signal that stopped
// the child. It follows si_pid and si_uid in the union, which starts after
// the three ints at pointer alignment.
func siginfoStatus(info *unix.Siginfo) int32 {
	off := 3*unsafe.Sizeof(int32(0)) + 2*unsafe.Sizeof(int32(0))
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off += unsafe.Sizeof(int32(0)) // the union is 8-aligned
	}
	return *(*int32)(unsafe.Add(unsafe.Pointer(info), off))
}
