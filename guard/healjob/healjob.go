// Package healjob is a heal that outlives the call that needs it.
//
// A cold build can take longer than any call's budget: cut at the budget,
// it never completes, however often an agent calls. So a heal a call needs
// (a rebuild, a package install, a model download) runs in a detached
// `guard heal --job` process (Spawn: its own session, nice 19, low IO
// priority), stopped only by its own limit, and the call waits for it
// within what is left of its budget (Wait). A later call finds it running
// and waits too; none starts a second one.
//
// Each heal has a job in the state folder (state.Layout.Jobs): a record
// (what heals, pid, start, percent, time left, phase, and at the end the
// result), a log of its stderr, and a lock. The lock is taken by the call
// that starts the heal (Claim) before anything is written and handed to the
// detached process, which holds it for its whole life: a held lock is a
// live heal, a free one a finished or killed heal, since the kernel drops a
// flock with the last process holding it and a pid alone may be reused.
package healjob

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/state"
)

// Record is a job's record, STATE/jobs/KEY.json (documented with the state
// folder's files).
type Record struct {
	Key   string    `json:"key"`   // build-NAME, package-NAME, model-PATHKEY
	What  string    `json:"what"`  // for people: "the build of llama-cpp", "the download of q.gguf"
	Names []string  `json:"names"` // the tools or model files it heals, as `guard heal --wait` takes them
	PID   int       `json:"pid"`
	Start time.Time `json:"start"`
	// Percent and LeftMS are the heal's own progress: -1 while unknown.
	Percent float64 `json:"percent"`
	LeftMS  int64   `json:"left_ms"`
	// LeftEstimated: LeftMS comes from the heal's own rate so far (a first
	// build), not from the last build's length.
	LeftEstimated bool `json:"left_estimated,omitempty"`
	// OverMS is the length the heal was expected to take, once it ran
	// past it (progress.Snapshot.Over); 0 otherwise.
	OverMS  int64     `json:"over_ms,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	Updated time.Time `json:"updated"`
	// LimitMS is the heal's own limit (the recipe's timeout, else
	// [budget] heal): 0 when the record does not say.
	LimitMS int64 `json:"limit_ms,omitempty"`
	// Result is "" while the heal runs, then OK, or Failed or Later
	// with Message.
	Result  Result    `json:"result,omitempty"`
	Message string    `json:"message,omitempty"`
	End     time.Time `json:"end,omitzero"`
}

// Left is the time left the heal last estimated; -1 when unknown.
func (r Record) Left() time.Duration {
	if r.LeftMS < 0 {
		return -1
	}
	return time.Duration(r.LeftMS) * time.Millisecond
}

// Limit is the heal's own limit; 0 when the record does not say.
func (r Record) Limit() time.Duration { return time.Duration(r.LimitMS) * time.Millisecond }

// staleGrace is how long past its own limit a heal may go without
// updating its record before a waiter calls it stuck: its stop's grace (a
// build step gets 3 s after SIGTERM) and the slow reaction of a heal at
// nice 19 on a busy machine.
const staleGrace = 10 * time.Second

// Stale reports whether a heal that has not ended last updated its record
// longer ago than its own limit and staleGrace: a heal that runs is ended
// by its limit by then (its record is updated at its start, so its limit
// has passed too), so one that has not is stopped (SIGSTOP: its own timer
// does not run) or stuck. Never for a record without a limit.
func (r Record) Stale(now time.Time) bool {
	return r.LimitMS > 0 && !r.Done() && now.Sub(r.Updated) > r.Limit()+staleGrace
}

// Snapshot is where the heal stood at its last update.
func (r Record) Snapshot() progress.Snapshot {
	return progress.Snapshot{Percent: r.Percent, Left: r.Left(), Status: r.Phase, Estimated: r.LeftEstimated,
		Over: time.Duration(r.OverMS) * time.Millisecond}
}

// Done reports whether the heal wrote its result.
func (r Record) Done() bool { return r.Result != "" }

// Where says how far the heal is, for one line: "46%, about 6s left",
// "time left unknown".
func (r Record) Where() string {
	var parts []string
	if r.Percent >= 0 {
		parts = append(parts, fmt.Sprintf("%.0f%%", r.Percent))
	}
	if r.OverMS > 0 {
		parts = append(parts, "past the "+(time.Duration(r.OverMS)*time.Millisecond).Round(time.Second).String()+" expected")
	}
	if left := r.Left(); left >= 0 {
		s := "about " + left.Round(time.Second).String() + " left"
		if r.LeftEstimated {
			s += " (estimated from its rate so far)"
		}
		parts = append(parts, s)
	} else {
		parts = append(parts, "time left unknown")
	}
	return strings.Join(parts, ", ")
}

// maxRecord bounds what is read of a record: a few names and a line.
const maxRecord = 64 << 10

// Paths of job key in the state folder stateDir.
func recordPath(stateDir, key string) string { return filepath.Join(dir(stateDir), key+".json") }
func lockPath(stateDir, key string) string   { return filepath.Join(dir(stateDir), key+".lock") }

// LogPath is where the heal's stderr goes.
func LogPath(stateDir, key string) string { return filepath.Join(dir(stateDir), key+".log") }

func dir(stateDir string) string { return state.Layout{Dir: stateDir}.Jobs() }

// Kind is what a job heals; a job's key begins with it.
type Kind string

// The kinds of job: a build recipe, a Debian package, a model file (by its
// path), or a tool with neither recipe nor package (its heal checks it
// again). A call's detached heal is given a tool or a model.
const (
	KindBuild   Kind = "build"
	KindPackage Kind = "package"
	KindModel   Kind = "model"
	KindTool    Kind = "tool"
)

// Key names a job after what it heals so that every call that needs the
// same heal finds the same job.
func Key(kind Kind, name string) string {
	if kind == KindModel {
		return string(KindModel) + "-" + state.PathKey(name)
	}
	// The kind's prefix keeps "." and ".." from being the whole name.
	return string(kind) + "-" + strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\n' {
			return '_'
		}
		return r
	}, name)
}

// ErrRunning is Claim finding a live heal of the same thing.
var ErrRunning = errors.New("a heal of it is already running")

// Job is a heal this process started (Claim) or runs (Adopt). It holds
// the job's lock until Close, or until every process given Lock exits.
type Job struct {
	stateDir string
	lock     *os.File

	mu     sync.Mutex
	rec    Record
	closed bool
}

// Claim takes the lock of job rec.Key and writes its first record (start
// now, progress unknown). A live heal holding the lock is ErrRunning: the
// caller waits for that one instead.
func Claim(stateDir string, rec Record) (*Job, error) {
	if err := os.MkdirAll(dir(stateDir), 0o700); err != nil {
		return nil, fmt.Errorf("create the jobs folder: %w", err)
	}
	f, err := state.OpenOwn(lockPath(stateDir, rec.Key), os.O_RDONLY, 0o600)
	if err != nil {
		return nil, err
	}
	// A Look holds the lock shared for an instant; a heal holds it for
	// its life. Only the second is a heal running.
	for try := 0; ; try++ {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", lockPath(stateDir, rec.Key), err)
		}
		if try == 10 {
			f.Close()
			return nil, ErrRunning
		}
		time.Sleep(10 * time.Millisecond)
	}
	now := time.Now()
	rec.PID, rec.Start, rec.Updated = os.Getpid(), now, now
	rec.Percent, rec.LeftMS = -1, -1
	rec.Result, rec.Message, rec.End, rec.Phase = "", "", time.Time{}, ""
	j := &Job{stateDir: stateDir, lock: f, rec: rec}
	if err := j.write(); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// Adopt is the detached heal's side of a job: lock is the job's lock file,
// inherited from the call that claimed it. The record takes this process's
// pid.
func Adopt(stateDir, key string, lock *os.File) (*Job, error) {
	// Only the job's own lock, held: a person running `guard heal --job`
	// by hand (fd 3 closed, or some other file) must not pass for a heal.
	held, err := lock.Stat()
	mine, err2 := os.Lstat(lockPath(stateDir, key))
	if err != nil || err2 != nil || !os.SameFile(held, mine) ||
		syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return nil, errors.New("heal --job: fd 3 is not this job's lock; a call starts this itself")
	}
	rec, err := read(stateDir, key)
	if err != nil {
		return nil, err
	}
	rec.PID = os.Getpid()
	j := &Job{stateDir: stateDir, lock: lock, rec: rec}
	return j, j.write()
}

// Lock is the job's lock file, to hand to the detached heal
// (exec.Cmd.ExtraFiles): the lock is then held for as long as it runs.
func (j *Job) Lock() *os.File { return j.lock }

// Record is the job's record as this process last wrote it.
func (j *Job) Record() Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.rec
}

// SetPID notes the pid of the detached heal in this process's copy of the
// record only. The heal writes its pid to the record itself (Adopt), and
// may already have ended and written its result: a write from here would
// put back a record without that result.
func (j *Job) SetPID(pid int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rec.PID = pid
}

// Progress records where the heal stands (a progress.Pace observer: each reporter of the detached heal calls it).
func (j *Job) Progress(s progress.Snapshot) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.Done() {
		return
	}
	j.rec.Percent, j.rec.LeftMS, j.rec.Phase, j.rec.LeftEstimated = s.Percent, -1, s.Status, s.Estimated
	j.rec.OverMS = s.Over.Milliseconds()
	if s.Left >= 0 {
		j.rec.LeftMS = s.Left.Milliseconds()
	}
	j.rec.Updated = time.Now()
	_ = j.write()
}

// maxMessage bounds a failed heal's message in its record (maxRecord
// bounds the whole record).
const maxMessage = 16 << 10

// Result is how a heal ended (Record.Result); "" while it runs.
type Result string

// The results of a heal. Later is that of a heal stopped for a trouble
// that passes (a download whose sources stalled, its partial kept): not a
// failure, and a call waiting for it says to call again later (exit 75).
const (
	OK     Result = "ok"
	Failed Result = "failed"
	Later  Result = "later"
)

// passing is an error that ends a heal for a trouble that passes.
type passing interface{ Passing() bool }

// Finish records the heal's result: ok for a nil err, else failed (Later
// for an error with a Passing method that says so) with err's message,
// whole (a download's reasons for each url are on the lines after its
// first), cut at maxMessage. It returns the error of writing the record.
func (j *Job) Finish(err error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rec.Result, j.rec.Message = OK, ""
	if err != nil {
		msg := err.Error()
		if len(msg) > maxMessage {
			msg = strings.ToValidUTF8(msg[:maxMessage], "") + " …"
		}
		j.rec.Result, j.rec.Message = Failed, msg
		if p := passing(nil); errors.As(err, &p) && p.Passing() {
			j.rec.Result = Later
		}
	} else {
		j.rec.Percent, j.rec.LeftMS = 100, 0
	}
	j.rec.End = time.Now()
	j.rec.Updated = j.rec.End
	return j.write()
}

// Close lets go of this process's hold on the lock. The call that started
// a detached heal closes it once the heal has its own; the lock is free
// when the last holder closed it or exited.
func (j *Job) Close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.closed {
		j.closed = true
		_ = j.lock.Close()
	}
}

// write replaces the record whole: a reader sees the last one or this one.
func (j *Job) write() error {
	b, err := json.Marshal(j.rec)
	if err != nil {
		return err
	}
	if err := state.Replace(recordPath(j.stateDir, j.rec.Key), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write the heal's record: %w", err)
	}
	return nil
}

// read reads a record; a link, a FIFO or garbage in its place is none.
func read(stateDir, key string) (Record, error) {
	b, err := state.ReadRegular(recordPath(stateDir, key), maxRecord, true)
	if err != nil {
		return Record{}, err
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil || rec.Key != key {
		return Record{}, fmt.Errorf("%s: not a heal's record", recordPath(stateDir, key))
	}
	return rec, nil
}

// Status is a job as another process sees it.
type Status struct {
	Record
	Alive bool // its heal holds the lock
}

// Stopped reports whether the live heal's process is stopped (SIGSTOP,
// SIGTSTP: state T in /proc/PID/stat) or stopped by a tracer (t). A held
// lock means the record's pid is the heal's: the heal holds it for its
// whole life and its children do not inherit it.
func (s Status) Stopped() bool {
	if !s.Alive || s.PID <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.PID) + "/stat")
	if err != nil {
		return false
	}
	st := procState(b)
	return st == 'T' || st == 't'
}

// procState is the state letter of a stat line, "pid (comm) S ...", whose
// comm may hold spaces and parentheses; 0 when there is none.
func procState(b []byte) byte {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// ErrStuck is a wait that Follow ended because the heal is stale: its
// record was not updated for longer than its own limit (Record.Stale).
var ErrStuck = errors.New("the heal is stopped or stuck")

// Look reads job key and tells whether its heal is alive; ok is false
// when there is no readable record.
func Look(stateDir, key string) (Status, bool) {
	rec, err := read(stateDir, key)
	if err != nil {
		return Status{}, false
	}
	return Status{Record: rec, Alive: alive(stateDir, key)}, true
}

// alive reports whether a process holds the job's lock.
func alive(stateDir, key string) bool {
	f, err := state.OpenRegular(lockPath(stateDir, key), true)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// List is every job with a record, in key order.
func List(stateDir string) []Status {
	names, _ := filepath.Glob(filepath.Join(dir(stateDir), "*.json"))
	var out []Status
	for _, n := range names {
		if s, ok := Look(stateDir, strings.TrimSuffix(filepath.Base(n), ".json")); ok {
			out = append(out, s)
		}
	}
	return out
}
