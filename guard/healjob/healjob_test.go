package healjob_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/healjob"
	"github.com/sandbox-guard/guard/guard/progress"
)

func TestAJobIsAliveWhileItsLockIsHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := healjob.Record{Key: healjob.Key("build", "demo"), What: "the build of demo", Names: []string{"tool"}, LeftMS: 9000}
	j, err := healjob.Claim(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	// A second call never starts a second heal of the same thing.
	if _, err := healjob.Claim(dir, rec); !errors.Is(err, healjob.ErrRunning) {
		t.Fatalf("second claim: %v", err)
	}
	j.Progress(progress.Snapshot{Percent: 40, Left: 6 * time.Second, Status: "[ 40%] cc 4.o"})
	s, ok := healjob.Look(dir, rec.Key)
	if !ok || !s.Alive || s.Percent != 40 || s.Left() != 6*time.Second || s.Where() != "40%, about 6s left" {
		t.Fatalf("look: %+v %v", s, ok)
	}
	j.Finish(nil)
	j.Close()
	if s, ok := healjob.Look(dir, rec.Key); !ok || s.Alive || s.Result != "ok" {
		t.Fatalf("after the end: %+v %v", s, ok)
	}
}

// The lock, not the pid, tells a live heal: a heal SIGKILLed with the
// lock is dead at once, and the next call may start a new one.
func TestAKilledHealIsSeenDead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := healjob.Record{Key: healjob.Key("build", "demo"), What: "the build of demo"}
	j, err := healjob.Claim(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("sleep", "1000")
	holder.ExtraFiles = []*os.File{j.Lock()}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	j.SetPID(holder.Process.Pid)
	j.Close() // the lock is the holder's alone now
	if s, _ := healjob.Look(dir, rec.Key); !s.Alive {
		t.Fatal("the holder's heal is not alive")
	}
	holder.Process.Signal(syscall.SIGKILL)
	holder.Wait()
	s, ok := healjob.Look(dir, rec.Key)
	if !ok || s.Alive || s.Done() {
		t.Fatalf("after SIGKILL: %+v %v", s, ok)
	}
	j2, err := healjob.Claim(dir, rec)
	if err != nil {
		t.Fatalf("a new heal after the killed one: %v", err)
	}
	j2.Close()
}

// A link or a FIFO planted where a record goes is no record: never
// followed, never waited on.
func TestAPlantedRecordIsNone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := healjob.Key("build", "demo")
	jobs := filepath.Join(dir, "jobs")
	os.MkdirAll(jobs, 0o700)
	if err := syscall.Mkfifo(filepath.Join(jobs, key+".json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := healjob.Look(dir, key); ok {
		t.Fatal("a FIFO read as a record")
	}
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"key":"build-x"}`), 0o600)
	os.Symlink(other, filepath.Join(jobs, "build-x.json"))
	if _, ok := healjob.Look(dir, "build-x"); ok {
		t.Fatal("a link read as a record")
	}
	if got := healjob.List(dir); len(got) != 0 {
		t.Fatalf("list: %+v", got)
	}
}

// A heal started by hand, without the job's lock, is refused: it would
// pass for a live heal that nothing waits on.
func TestAdoptWantsTheJobsOwnLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := healjob.Record{Key: healjob.Key("build", "demo")}
	j, err := healjob.Claim(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	other, err := os.CreateTemp(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := healjob.Adopt(dir, rec.Key, other); err == nil {
		t.Fatal("adopted with another file as the lock")
	}
}

// A record that cannot be read while the heal holds its lock (a FIFO
// planted in its place, garbage) is no end of the heal: the wait goes on
// until the heal ends or the caller's time does.
func TestFollowWaitsOnALiveHealWhoseRecordIsUnreadable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := healjob.Record{Key: healjob.Key("build", "demo"), What: "the build of demo"}
	j, err := healjob.Claim(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	path := filepath.Join(dir, "jobs", rec.Key+".json")
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s, err := healjob.Follow(ctx, dir, rec.Key, io.Discard, func(healjob.Status) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) || !s.Alive {
		t.Fatalf("follow returned %+v, %v; want the wait to go on until ctx ends", s, err)
	}
}

// A failed heal's message is kept whole: a download that failed on every
// url says why on the lines after its first.
func TestFinishKeepsTheWholeMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := healjob.Record{Key: healjob.Key("model", "/m/q.gguf")}
	j, err := healjob.Claim(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	msg := "download q.gguf: every url failed:\nhttp://a/q.gguf: connection refused\nhttp://b/q.gguf: 404"
	j.Finish(errors.New(msg))
	j.Close()
	if s, ok := healjob.Look(dir, rec.Key); !ok || s.Result != "failed" || s.Message != msg {
		t.Fatalf("record after a failure: %+v %v", s, ok)
	}
}

// A detached heal can end before the call that started it has heard its
// pid (a remembered failure fails at once): the call recording that pid
// afterwards must not overwrite the heal's result, or the waiting call
// reads "ended without a result" and starts it again (seen in CI in
// model_mismatch.txtar).
func TestSetPIDAfterTheHealEndedKeepsItsResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := healjob.Record{Key: healjob.Key("model", "/m/q.gguf"), What: "the download of q.gguf"}
	call, err := healjob.Claim(dir, rec)
	if err != nil {
		t.Fatal(err)
	}
	heal, err := healjob.Adopt(dir, rec.Key, call.Lock()) // the detached heal's side
	if err != nil {
		t.Fatal(err)
	}
	heal.Finish(errors.New("remembered: guard tries again after 10m"))
	call.SetPID(4242)
	call.Close()
	if s, ok := healjob.Look(dir, rec.Key); !ok || s.Result != "failed" || s.Message != "remembered: guard tries again after 10m" {
		t.Fatalf("record after the call's SetPID: %+v %v", s, ok)
	}
}

// A record not updated for longer than the heal's own limit (and the
// grace past it) is stale; one without a limit, or with a result, never.
func TestStale(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		name  string
		rec   healjob.Record
		stale bool
	}{
		{"within its limit", healjob.Record{LimitMS: 3000, Updated: now.Add(-2 * time.Second)}, false},
		{"within the grace past it", healjob.Record{LimitMS: 3000, Updated: now.Add(-10 * time.Second)}, false},
		{"past both", healjob.Record{LimitMS: 3000, Updated: now.Add(-14 * time.Second)}, true},
		{"no limit said", healjob.Record{Updated: now.Add(-time.Hour)}, false},
		{"ended", healjob.Record{LimitMS: 3000, Updated: now.Add(-time.Hour), Result: "failed"}, false},
	} {
		if got := c.rec.Stale(now); got != c.stale {
			t.Errorf("%s: Stale = %v, want %v", c.name, got, c.stale)
		}
	}
}

// A live heal whose process is stopped is Stopped; continued, it is not.
func TestStopped(t *testing.T) {
	t.Parallel()
	sleep := exec.Command("sleep", "1000")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	s := healjob.Status{Record: healjob.Record{PID: sleep.Process.Pid}, Alive: true}
	if s.Stopped() {
		t.Fatal("a running process is Stopped")
	}
	if err := sleep.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !s.Stopped() {
		if time.Now().After(deadline) {
			t.Fatal("a process stopped with SIGSTOP is never Stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if dead := (healjob.Status{Record: s.Record}); dead.Stopped() {
		t.Error("a heal that is not alive (its lock free) is Stopped: its pid may be another's")
	}
	if err := sleep.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for s.Stopped() {
		if time.Now().After(deadline) {
			t.Fatal("a continued process is still Stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A heal past the length it was expected to take says so in its line.
func TestWhereSaysAHealRanPastItsExpectation(t *testing.T) {
	t.Parallel()
	r := healjob.Record{Percent: 5, LeftMS: 1140_000, LeftEstimated: true, OverMS: 48_000}
	if got, want := r.Where(), "5%, past the 48s expected, about 19m0s left (estimated from its rate so far)"; got != want {
		t.Errorf("Where() = %q, want %q", got, want)
	}
	r = healjob.Record{Percent: -1, LeftMS: -1, OverMS: 48_000}
	if got, want := r.Where(), "past the 48s expected, time left unknown"; got != want {
		t.Errorf("Where() = %q, want %q", got, want)
	}
}
