package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestExitCodePassesThrough(t *testing.T) {
	for _, code := range []int{0, 3, 42} {
		script := writeScript(t, "exit "+itoa(code))
		r := run(t, context.Background(), Spec{Path: script})
		if r.Outcome != Exited || r.Code != code || r.Status() != code || r.Err != nil {
			t.Errorf("exit %d: got %v code %d status %d err %v", code, r.Outcome, r.Code, r.Status(), r.Err)
		}
	}
}

func TestExitZeroWithoutOutputIsExited(t *testing.T) {
	r := run(t, context.Background(), Spec{Path: "/bin/true", Capture: true})
	if r.Outcome != Exited || r.Status() != 0 || r.StdoutN != 0 || r.Stdout.Len() != 0 {
		t.Fatalf("got %+v", r)
	}
}

func TestDeathBySignal(t *testing.T) {
	script := writeScript(t, "kill -KILL $$")
	r := run(t, context.Background(), Spec{Path: script})
	if r.Outcome != Signaled || r.Signal != syscall.SIGKILL || r.Status() != 128+9 {
		t.Fatalf("got %v signal %v status %d", r.Outcome, r.Signal, r.Status())
	}
}

func TestArgsEnvDirStdoutStderr(t *testing.T) {
	dir := t.TempDir()
	script := writeScript(t, `echo "$1 $GUARD_TEST_VAR $(pwd)"; echo oops >&2`)
	var out, errOut bytes.Buffer
	r := run(t, context.Background(), Spec{
		Path: script, Argv: []string{"tool", "arg1"}, Env: []string{"GUARD_TEST_VAR=v", "PATH=/usr/bin:/bin"},
		Dir: dir, Stdout: &out, Stderr: &errOut, Capture: true,
	})
	want := "arg1 v " + dir + "\n"
	if r.Status() != 0 || out.String() != want || captured(r) != want || r.StdoutN != int64(len(want)) {
		t.Fatalf("status %d stdout %q captured %q n %d, want %q", r.Status(), out.String(), captured(r), r.StdoutN, want)
	}
	if errOut.String() != "oops\n" {
		t.Fatalf("stderr %q", errOut.String())
	}
}

func TestCaptureKeepsInvalidUTF8(t *testing.T) {
	script := writeScript(t, `printf '\377\376abc\200\n'`)
	var out bytes.Buffer
	r := run(t, context.Background(), Spec{Path: script, Stdout: &out, Capture: true})
	want := []byte{0xff, 0xfe, 'a', 'b', 'c', 0x80, '\n'}
	if captured(r) != string(want) || !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("captured %q, passed on %q, want %q", captured(r), out.Bytes(), want)
	}
}

func TestStartFailures(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noShebang := filepath.Join(dir, "noshebang")
	if err := os.WriteFile(noShebang, []byte("\x00\x01binary?"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"missing", filepath.Join(dir, "missing"), 127},
		{"not executable", plain, 126},
		{"directory", dir, 126},
		{"bad format", noShebang, 126},
	} {
		r := run(t, context.Background(), Spec{Path: tc.path})
		if r.Outcome != StartFailed || r.Status() != tc.status || r.Err == nil {
			t.Errorf("%s: got %v status %d err %v, want start failure %d", tc.name, r.Outcome, r.Status(), r.Err, tc.status)
		}
	}
}

// The budget ends the run, and the grandchild the tool started, which
// ignores SIGTERM like the tool does, is dead afterwards too.
func TestTimeoutKillsGrandchild(t *testing.T) {
	// Orphans are re-parented to this process while the test runs, so that
	// it can reap the dead grandchild: kill(pid, 0) then reports ESRCH
	// instead of finding a zombie nobody reaps.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("no subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	script := writeScript(t, `trap '' TERM
sleep 1000 &
echo $! > "$1"
wait
sleep 1000`)
	// On a loaded machine the budget may run out before the script has
	// started its grandchild; then there is nothing to check and the
	// next attempt has a longer budget.
	for budget := 200 * time.Millisecond; budget < 10*time.Second; budget *= 2 {
		pidFile := filepath.Join(t.TempDir(), "pid")
		r := run(t, context.Background(), Spec{
			Path: script, Argv: []string{script, pidFile}, Budget: budget, Grace: 100 * time.Millisecond,
		})
		if r.Outcome != TimedOut || r.Status() != 124 {
			t.Fatalf("got %v status %d err %v", r.Outcome, r.Status(), r.Err)
		}
		if r.Elapsed > budget+20*time.Second {
			t.Fatalf("run took %v", r.Elapsed)
		}
		requireGroupGone(t, r.Pid)
		b, err := os.ReadFile(pidFile)
		if err != nil || len(b) == 0 {
			t.Logf("budget %v ran out before the grandchild started", budget)
			continue
		}
		requireDead(t, atoi(t, strings.TrimSpace(string(b))))
		return
	}
	t.Skip("machine too loaded to start the script within the budgets tried")
}

func requireDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A background process the tool leaves behind keeps its stdout pipe open;
// that must not hold the call once the tool has exited.
func TestLeftoverHoldingPipeDoesNotHoldRun(t *testing.T) {
	script := writeScript(t, "sleep 1000 & echo done")
	r := run(t, context.Background(), Spec{Path: script, Capture: true})
	if r.Outcome != Exited || r.Status() != 0 || captured(r) != "done\n" {
		t.Fatalf("got %v status %d stdout %q", r.Outcome, r.Status(), captured(r))
	}
	if r.Elapsed > 20*time.Second {
		t.Fatalf("run took %v", r.Elapsed)
	}
}

func TestContextDeadlineEndsRun(t *testing.T) {
	script := writeScript(t, "sleep 1000")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := run(t, ctx, Spec{Path: script})
	if r.Outcome != TimedOut || r.Status() != 124 || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("got %v status %d err %v", r.Outcome, r.Status(), r.Err)
	}
	requireGroupGone(t, r.Pid)

	r = run(t, ctx, Spec{Path: script}) // already past the deadline: nothing starts
	if r.Outcome != TimedOut || r.Pid != 0 {
		t.Fatalf("expired context: got %v pid %d", r.Outcome, r.Pid)
	}
}

// guard receives SIGTERM while a tool runs: the tool gets it (its trap
// runs), and the call ends with the tool's own answer, as a direct call and
// coreutils timeout do: the trap's exit status, or 128+N when the tool died
// of the signal.
func TestForwardedSignalKeepsToolsStatus(t *testing.T) {
	for _, tc := range []struct {
		name, trap string
		want       int
	}{
		{"trap exits 7", `trap 'echo term > "$1"; exit 7' TERM`, 7},
		{"trap exits 0", `trap 'echo term > "$1"; exit 0' TERM`, 0},
		{"dies of it", `trap 'echo term > "$1"; trap - TERM; kill -TERM $$' TERM`, 143},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := signalHelper(t, tc.trap, syscall.SIGTERM); code != tc.want {
				t.Fatalf("helper exit %d, want %d", code, tc.want)
			}
		})
	}
}

// signalHelper runs a helper guard supervising a script with trap, sends
// guard sig once the script runs, and returns guard's exit status after
// checking that the trap ran.
func signalHelper(t *testing.T, trap string, sig syscall.Signal) int {
	t.Helper()
	dir := t.TempDir()
	termFile, readyFile := filepath.Join(dir, "term"), filepath.Join(dir, "ready")
	script := writeScript(t, trap+`
echo ready > "$2"
while :; do sleep 0.05; done`)
	cmd := exec.Command(os.Args[0], termFile, readyFile, script)
	cmd.Env = append(os.Environ(), helperEnv+"=run")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killGroupMembers(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitFile(t, readyFile)
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("helper did not exit after the signal")
	}
	if got := waitFile(t, termFile); got != "term\n" {
		t.Fatalf("trap wrote %q", got)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func TestExecReplacesProcess(t *testing.T) {
	script := writeScript(t, `[ "$1" = from-exec ] || exit 1
exit 7`)
	cmd := exec.Command(os.Args[0], script)
	cmd.Env = append(os.Environ(), helperEnv+"=exec")
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Fatalf("exit %d (%v), want 7", code, err)
	}

	missing := filepath.Join(t.TempDir(), "missing")
	err = Exec(missing, nil, nil)
	if !errors.Is(err, syscall.ENOENT) || StartStatus(err) != 127 || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Exec(missing) = %v", err)
	}
}

func TestStallEndsSilentTool(t *testing.T) {
	script := writeScript(t, "echo hi; sleep 1000")
	r := run(t, context.Background(), Spec{Path: script, Stall: 200 * time.Millisecond, Capture: true})
	if r.Outcome != Stalled || r.Status() != 124 || captured(r) != "hi\n" {
		t.Fatalf("got %v status %d stdout %q", r.Outcome, r.Status(), captured(r))
	}
	requireGroupGone(t, r.Pid)
}

// stampWriter records when each write came.
type stampWriter struct {
	mu     sync.Mutex
	stamps []time.Time
}

func (w *stampWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stamps = append(w.stamps, time.Now())
	return len(p), nil
}

// longestGap is the longest time without output between start, each write
// and end.
func (w *stampWriter) longestGap(start, end time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	prev := start
	for _, t := range append(w.stamps, end) {
		longest = max(longest, t.Sub(prev))
		prev = t
	}
	return longest
}

func TestSteadySlowOutputIsNotStall(t *testing.T) {
	const stall = 300 * time.Millisecond
	// The script prints a dot for each line the test feeds it every 50 ms
	// for a second, with shell builtins only: a fork per dot can take
	// longer than the stall period on a loaded machine.
	script := writeScript(t, `while read x; do printf .; done`)
	for attempt := 0; attempt < 3; attempt++ {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer w.Close()
			for range 20 {
				if _, err := w.WriteString("\n"); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		out := &stampWriter{}
		start := time.Now()
		res := run(t, context.Background(), Spec{Path: script, Stdin: r, Stdout: out, Stall: stall})
		end := time.Now()
		r.Close()
		if res.Outcome == Exited && res.Status() == 0 && res.StdoutN == 20 {
			return
		}
		// A stall is only right if the output really paused that long,
		// which a loaded machine can make happen: then try again.
		gap := out.longestGap(start, end)
		if res.Outcome != Stalled || gap < stall-50*time.Millisecond {
			t.Fatalf("got %v status %d n %d, longest pause in output %v", res.Outcome, res.Status(), res.StdoutN, gap)
		}
		t.Logf("attempt %d: the output really paused for %v", attempt, gap)
	}
	t.Skip("machine too loaded to produce steady output")
}

func TestSpinnerIsNotProgress(t *testing.T) {
	for _, stream := range []string{"", " >&2"} {
		script := writeScript(t, `echo working
while :; do
  printf '\r|'`+stream+`; sleep 0.05
  printf '\r/'`+stream+`; sleep 0.05
  printf '\033[1G-'`+stream+`; sleep 0.05
done`)
		r := run(t, context.Background(), Spec{Path: script, Stall: 300 * time.Millisecond})
		if r.Outcome != Stalled {
			t.Fatalf("spinner%s: got %v status %d", stream, r.Outcome, r.Status())
		}
		requireGroupGone(t, r.Pid)
	}
}

// openStdin gives the child a stdin that stays open, as an agent's would,
// with input already written to it.
func openStdin(t *testing.T, input string) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if _, err := w.WriteString(input); err != nil {
		t.Fatal(err)
	}
	return r
}

func promptSpec(script string, stdin *os.File, policy Policy) Spec {
	return Spec{
		Path: script, Stdin: stdin, Capture: true, Prompts: policy,
		PromptQuiet: 100 * time.Millisecond, Budget: 30 * time.Second,
	}
}

// answeredPrompts lists the questions a run answered.
func answeredPrompts(r Result) string {
	var out []string
	for _, a := range r.Answered {
		out = append(out, a.Prompt+" -> "+a.Reply)
	}
	return strings.Join(out, "|")
}

// Under "answer" guard answers yes only where the question says yes is
// the default; under "yes" it answers every yes/no question.
func TestPromptAnswered(t *testing.T) {
	for _, tc := range []struct {
		policy       Policy
		prompt, want string
		reply        string
	}{
		{PromptsAnswer, "Ok to proceed? (y) ", "answer=y", "y"},
		{PromptsAnswer, "Continue? [Y/n] ", "answer=y", "y"},
		{PromptsAnswer, "Install? (Yes/no): ", "answer=yes", "yes"},
		{PromptsYes, "Overwrite existing files? (y/N) ", "answer=y", "y"},
		{PromptsYes, "Are you sure you want to continue connecting (yes/no/[fingerprint])? ", "answer=yes", "yes"},
	} {
		script := writeScript(t, `printf '`+tc.prompt+`'; read ans; echo "answer=$ans"`)
		r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), tc.policy))
		if r.Outcome != Exited || r.Status() != 0 || !strings.Contains(captured(r), tc.want+"\n") {
			t.Fatalf("%q: got %v status %d stdout %q", tc.prompt, r.Outcome, r.Status(), captured(r))
		}
		if got, want := answeredPrompts(r), strings.TrimSpace(tc.prompt)+" -> "+tc.reply; got != want {
			t.Fatalf("%q: answered %q, want %q", tc.prompt, got, want)
		}
	}
}

// A question whose default is no, or that names no default, is never
// answered yes under "answer": the run ends and the question is quoted.
func TestPromptWithoutYesDefaultNotAnswered(t *testing.T) {
	for _, prompt := range []string{"Overwrite existing files? (y/N) ", "Proceed? (y/n) ", "Continue connecting (yes/no)? "} {
		script := writeScript(t, `printf '`+prompt+`'; read ans; echo "answer=$ans"`)
		r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), PromptsAnswer))
		if r.Outcome != PromptKilled || r.Status() != 124 || r.Prompt != strings.TrimSpace(prompt) || len(r.Answered) != 0 {
			t.Fatalf("%q: got %v status %d prompt %q answered %q", prompt, r.Outcome, r.Status(), r.Prompt, answeredPrompts(r))
		}
		if strings.Contains(captured(r), "answer=") {
			t.Fatalf("%q: the tool got an answer: %q", prompt, captured(r))
		}
		requireGroupGone(t, r.Pid)
	}
}

// A question guard does not recognise, at which the tool reads its stdin,
// ends the run at once: the kernel's word, no wording needed. Before, it
// waited for the budget.
func TestUnrecognisedQuestionEndsRun(t *testing.T) {
	for _, policy := range []Policy{PromptsAnswer, PromptsKill} {
		script := writeScript(t, `printf 'Creating a new app.\nProject name: '; read name; echo "named $name"`)
		s := promptSpec(script, openStdin(t, ""), policy)
		s.Budget = 20 * time.Second
		r := run(t, context.Background(), s)
		if r.Outcome != PromptKilled || r.Status() != 124 || r.Prompt != "Project name:" {
			t.Fatalf("%s: got %v status %d prompt %q after %v", policy, r.Outcome, r.Status(), r.Prompt, r.Elapsed)
		}
		requireGroupGone(t, r.Pid)
	}
}

// A tool that pauses after a line that looks like a question, but does not
// read its input (llama.cpp generating a markdown quote "> ", then
// thinking), is at work, not at a prompt: it is left alone.
func TestQuietPromptLikeLineWithoutReadIsNotWaiting(t *testing.T) {
	for _, line := range []string{"> ", "Overwrite? [y/N] ", "Project name: "} {
		script := writeScript(t, `printf 'An answer:\n`+line+`'; sleep 1; echo 'quoted text, and more'`)
		r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), PromptsKill))
		if r.Outcome != Exited || r.Status() != 0 || !strings.HasSuffix(captured(r), "quoted text, and more\n") {
			t.Fatalf("%q: got %v status %d prompt %q stdout %q", line, r.Outcome, r.Status(), r.Prompt, captured(r))
		}
	}
}

// A tool that printed a finished line and then reads its stdin (a filter
// waiting on a slow pipe) is not at a question while its input comes within
// the finished-line grace (finishedQuiet quiet periods): the kernel cannot
// tell it from a question printed with a newline, so input later than that
// ends the run at the line, as docs/decisions.md says.
func TestInputWithinFinishedLineGraceIsNotQuestion(t *testing.T) {
	s := promptSpec("", nil, PromptsKill)
	grace := finishedQuiet * s.PromptQuiet
	for _, tc := range []struct {
		delay time.Duration
		want  Outcome
	}{
		{grace / 2, Exited},
		{3 * grace, PromptKilled},
	} {
		in, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			time.Sleep(tc.delay)
			w.WriteString("late input\n")
			w.Close()
		}()
		s.Path = writeScript(t, `echo reading; read x; echo "got $x"`)
		s.Stdin = in
		r := run(t, context.Background(), s)
		<-wrote
		in.Close()
		switch tc.want {
		case Exited:
			if r.Outcome != Exited || captured(r) != "reading\ngot late input\n" {
				t.Fatalf("input after %v: got %v prompt %q stdout %q", tc.delay, r.Outcome, r.Prompt, captured(r))
			}
		case PromptKilled:
			if r.Outcome != PromptKilled || r.Status() != 124 || r.Prompt != "reading" || captured(r) != "reading\n" {
				t.Fatalf("input after %v: got %v status %d prompt %q stdout %q", tc.delay, r.Outcome, r.Status(), r.Prompt, captured(r))
			}
			requireGroupGone(t, r.Pid)
		}
	}
}

// A tool that asks the same question again right after guard's answer did
// not take it: answering on would go on for good, so after a few tries the
// run ends at the question.
func TestQuestionAskedAgainAfterAnswerEndsRun(t *testing.T) {
	script := writeScript(t, `while :; do printf 'Continue? (Y/n) '; read a; done`)
	s := promptSpec(script, openStdin(t, ""), PromptsAnswer)
	s.Budget = 20 * time.Second
	r := run(t, context.Background(), s)
	if r.Outcome != PromptKilled || r.Prompt != "Continue? (Y/n)" || len(r.Answered) != maxSameAnswers {
		t.Fatalf("got %v prompt %q answered %d times (%v)", r.Outcome, r.Prompt, len(r.Answered), r.Elapsed)
	}
}

// The same question asked again for each item, with work printed between,
// is answered every time.
func TestSameQuestionForEachItemAnswered(t *testing.T) {
	script := writeScript(t, `for f in a b c d e; do echo "copying $f"; printf 'Overwrite? (Y/n) '; read x; done; echo done`)
	r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), PromptsAnswer))
	if r.Outcome != Exited || len(r.Answered) != 5 || !strings.HasSuffix(captured(r), "done\n") {
		t.Fatalf("got %v prompt %q answered %d times", r.Outcome, r.Prompt, len(r.Answered))
	}
}

func TestPromptAnsweredOncePerAppearance(t *testing.T) {
	// The first prompt is not read at once: the answer waits in the pipe
	// and the same prompt must not be answered again meanwhile. The second
	// is a new appearance.
	script := writeScript(t, `printf 'First? [y/N] '; sleep 0.6; read a
printf 'Second? [y/N] '; read b; echo "$a$b"`)
	r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), PromptsYes))
	if r.Status() != 0 || !strings.HasSuffix(captured(r), "yy\n") {
		t.Fatalf("got %v status %d stdout %q", r.Outcome, r.Status(), captured(r))
	}
	if got, want := answeredPrompts(r), "First? [y/N] -> y|Second? [y/N] -> y"; got != want {
		t.Fatalf("answered %q, want %q", got, want)
	}
}

func TestStdinCopiedUnderAnswerPolicy(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.WriteString("hello\nworld\n"); err != nil {
		t.Fatal(err)
	}
	w.Close() // the end of guard's stdin must reach the child, or cat never ends
	script := writeScript(t, `read x; echo "got $x"; cat`)
	res := run(t, context.Background(), promptSpec(script, r, PromptsAnswer))
	if res.Status() != 0 || captured(res) != "got hello\nworld\n" {
		t.Fatalf("got %v status %d stdout %q", res.Outcome, res.Status(), captured(res))
	}
}

func TestPasswordPromptKilled(t *testing.T) {
	script := writeScript(t, `printf 'Password: '; read pw; echo leaked`)
	r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), PromptsAnswer))
	if r.Outcome != PromptKilled || r.Status() != 124 || r.Prompt != "Password:" || len(r.Answered) != 0 {
		t.Fatalf("got %v status %d prompt %q answered %q", r.Outcome, r.Status(), r.Prompt, answeredPrompts(r))
	}
	if strings.Contains(captured(r), "leaked") {
		t.Fatalf("a password prompt was answered: %q", captured(r))
	}
	requireGroupGone(t, r.Pid)
}

func TestInquirerPromptKilled(t *testing.T) {
	script := writeScript(t, `printf '\033[36m?\033[0m Project name \342\200\272 my-app'; read x`)
	r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), PromptsAnswer))
	if r.Outcome != PromptKilled || r.Prompt != "? Project name › my-app" {
		t.Fatalf("got %v prompt %q", r.Outcome, r.Prompt)
	}
}

func TestKillPolicy(t *testing.T) {
	script := writeScript(t, `printf 'Need to install cowsay\nOk to proceed? (y) ' >&2; read x`)
	r := run(t, context.Background(), promptSpec(script, openStdin(t, ""), PromptsKill))
	if r.Outcome != PromptKilled || r.Status() != 124 || r.Prompt != "Ok to proceed? (y)" {
		t.Fatalf("got %v status %d prompt %q", r.Outcome, r.Status(), r.Prompt)
	}
	requireGroupGone(t, r.Pid)
}

func TestPTYChildSeesTerminal(t *testing.T) {
	script := writeScript(t, `if [ -t 0 ] && [ -t 1 ] && [ -t 2 ]; then echo tty; else echo notty; fi
echo err >&2`)
	var out bytes.Buffer
	r := run(t, context.Background(), Spec{Path: script, PTY: true, Capture: true, Stdout: &out})
	if r.Outcome != Exited || r.Status() != 0 {
		t.Fatalf("got %v status %d err %v", r.Outcome, r.Status(), r.Err)
	}
	// The terminal turns \n into \r\n, and stderr shares it.
	if want := "tty\r\nerr\r\n"; captured(r) != want || out.String() != want || r.StdoutN != int64(len(want)) {
		t.Fatalf("captured %q passed on %q, want %q", captured(r), out.String(), want)
	}
}

func TestPTYPromptAnswered(t *testing.T) {
	script := writeScript(t, `printf 'Ok to proceed? (y) '; read ans; echo "answer=$ans"`)
	s := promptSpec(script, nil, PromptsAnswer)
	s.PTY = true
	r := run(t, context.Background(), s)
	if r.Status() != 0 || !strings.Contains(captured(r), "answer=y\r\n") || len(r.Answered) != 1 {
		t.Fatalf("got %v status %d stdout %q answered %q", r.Outcome, r.Status(), captured(r), answeredPrompts(r))
	}
}

func TestPTYTimeoutKillsGroup(t *testing.T) {
	script := writeScript(t, `trap '' TERM HUP; sleep 1000 & echo started; sleep 1000`)
	r := run(t, context.Background(), Spec{Path: script, PTY: true, Budget: 200 * time.Millisecond, Grace: 100 * time.Millisecond})
	if r.Outcome != TimedOut || r.Status() != 124 {
		t.Fatalf("got %v status %d", r.Outcome, r.Status())
	}
	requireGroupGone(t, r.Pid)
}
