// Package models keeps the GGUF models a call needs present and intact.
//
// Check is the fast path: verify.Quick, no lock, no hashing; Usable is
// the same for a caller that only asks whether the file is healthy.
// Ensure is the slow path, taken only when Check finds something wrong: it
// takes the model's lock (so twenty agent calls at once make one download),
// checks again, hashes once if only the stamp is stale, and downloads at
// the path the call named. A failed heal is remembered for a while, so a
// loop of agent calls fails fast with the reason instead of downloading on
// every call.
package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lease"
	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// Defaults for the zero fields of a Healer.
const (
	DefaultHealTimeout    = 30 * time.Minute
	DefaultFailureBackoff = 10 * time.Minute
	// OfflineBackoff is how long a heal that failed because the machine
	// seemed offline is remembered: long enough that a loop of calls does
	// not ask DNS each time, short enough that the network coming back is
	// noticed.
	OfflineBackoff = time.Minute
)

// Healer checks and heals model files. Its zero durations take the
// defaults above.
type Healer struct {
	StateDir       string              // locks/, stamps/ and failures/ go below it
	Log            func(heallog.Event) // heal events; nil = not logged
	Stderr         io.Writer           // messages and progress for people; nil = none
	HealTimeout    time.Duration       // waiting for another healer plus our own download
	FailureBackoff time.Duration       // how long a failed heal is remembered
	Token          string              // HF_TOKEN
	Client         *http.Client        // nil = fetch.DefaultClient()
	FetchBackoff   time.Duration       // base retry back-off of a download (tests use ms)
	RateWindow     time.Duration       // a download under fetch.DefaultMinRate over this window is retried; 0 = fetch's default
	Pace           progress.Pace       // progress line interval off a terminal, or its observer (progress.Pace)
	Registry       *registry.Client    // reaches oci:// urls (registry.go); nil = they fail
	// Fleet reaches the fleet's leases (fleet.go), and PushTo starts, in
	// the background, the push of the model file at path to a model's
	// push_to, which lets go of the fleet's lease of id once the file is
	// there; nil = no model goes through a lease.
	Fleet  *lease.Fleet
	PushTo func(path, dest, leaseID string) error
}

func (h *Healer) layout() state.Layout { return state.Layout{Dir: h.StateDir} }

func (h *Healer) stampDir() string { return h.layout().Stamps() }

func spec(m *manifest.Model, path string) verify.Spec {
	return verify.Spec{Path: path, Size: m.Size, SHA256: m.SHA256}
}

// Check is the fast path: one open, one fstat, one header read, one stamp
// read. It takes no lock and logs nothing.
func (h *Healer) Check(m *manifest.Model, path string) verify.Status {
	return verify.Quick(spec(m, path), h.stampDir())
}

// Usable is Check for a caller that only asks Status.Healthy, such as a
// call about to load the model: it does not tell OK from Unverified for a
// model with no pin, so it reads no stamp for one (verify.Usable).
func (h *Healer) Usable(m *manifest.Model, path string) verify.Status {
	return verify.Usable(spec(m, path), h.stampDir())
}

// Ensure makes the file at path a good copy of m, or says why it cannot.
// force ignores a remembered failure (`guard heal`). tool names the caller
// in heal events.
func (h *Healer) Ensure(ctx context.Context, tool string, m *manifest.Model, path string, force bool) error {
	switch st := h.Usable(m, path); {
	case st.Healthy():
		return nil
	case st == verify.NotRegular:
		return refuseNotRegular(path)
	}
	dest, err := destination(path)
	if err != nil {
		return err
	}
	start := time.Now()
	limit := cmpDur(h.HealTimeout, DefaultHealTimeout)
	ctx, cancel := context.WithTimeoutCause(ctx, limit, errHealLimit)
	defer cancel()

	name := filepath.Base(path)
	held, err := lock.Acquire(ctx, h.layout().Lock("model-"+state.PathKey(dest)), func() {
		h.say("guard: another process is healing %s; waiting", name)
		h.event(heallog.Event{Event: heallog.LockWait, Tool: tool, Target: path})
	})
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return timedOut(ctx, name, start, limit, errWaiting.Error(), 0)
		}
		return fmt.Errorf("heal model %s: %w", name, err)
	}
	defer held.Release()

	err = h.heal(ctx, tool, m, path, dest, force)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		kept := fetch.PartialBytes(dest)
		doing := "downloading"
		if errors.Is(err, errWaiting) {
			doing = errWaiting.Error()
		}
		te := timedOut(ctx, name, start, limit, doing, kept)
		var stopped *fetch.StoppedError
		if errors.As(err, &stopped) {
			te.LastFailure = stopped.Last.Error()
		}
		return te
	}
	return err
}

// errWaiting marks a heal that ended while another process downloaded.
var errWaiting = errors.New("waiting for another process's download")

// heal runs under the model's lock; dest is the file path names (see
// destination), where the download goes. The lock is a file in guard's
// state folder, which a cleaner may delete while a download runs; the
// partial file's own lock is what two downloads of one file really meet
// at, so a healer that finds another writing it waits there and checks
// again, never failing because someone else is downloading.
func (h *Healer) heal(ctx context.Context, tool string, m *manifest.Model, path, dest string, force bool) error {
	name := filepath.Base(path)
	for {
		// Another process may have healed it while we waited.
		st := h.Usable(m, path)
		if st.Healthy() {
			return nil
		}
		if st == verify.NotRegular {
			return refuseNotRegular(path)
		}
		if !force {
			if f, ok := h.failure(path, m); ok {
				return fmt.Errorf("model %s could not be healed %s ago: %s; guard tries again after %s (run `guard heal %s` to retry now)",
					name, time.Since(f.At).Round(time.Second), f.Reason, f.Until.Format("15:04:05"), m.File)
			}
		}
		waited, err := fetch.WaitIdle(ctx, dest, func() {
			h.say("guard: another process is downloading %s; waiting", name)
			h.event(heallog.Event{Event: heallog.LockWait, Tool: tool, Target: dest + ".partial"})
		})
		if err != nil {
			return fmt.Errorf("heal model %s: %w: %w", name, errWaiting, err)
		}
		if waited {
			continue
		}
		if st == verify.Stale {
			st, err = h.verify(tool, m, path)
			if err != nil || st.Healthy() {
				return err
			}
		}
		held := h.takeTurn(ctx, m, dest)
		if ctx.Err() != nil {
			return fmt.Errorf("heal model %s: %w: the fleet's download: %w", name, errWaiting, context.Cause(ctx))
		}
		err = h.download(ctx, tool, m, path, dest, st)
		h.publish(m, path, held, err)
		if !errors.Is(err, fetch.ErrBusy) {
			return err
		}
	}
}

// errHealLimit is the cause of a heal's context when [budget] heal ends it
// rather than the caller's own deadline.
var errHealLimit = errors.New("[budget] heal")

// TimeoutError is a heal that ran out of time: the caller's deadline (what
// remains of a call's budget) or the manifest's [budget] heal. It matches
// context.DeadlineExceeded. The partial download is kept for the next
// call, and nothing is remembered as a failure: the source was not at
// fault.
type TimeoutError struct {
	Model string        // file name
	After time.Duration // since the heal began
	Limit string        // which limit ended it, for people
	Doing string        // "downloading" or "waiting for another process's download"
	Kept  int64         // bytes of the partial file kept; 0 = none
	// LastFailure is the failed attempt the download was retrying after
	// when the time ran out; "" when it was not retrying.
	LastFailure string
}

func (e *TimeoutError) Error() string {
	s := fmt.Sprintf("heal model %s: timed out after %s %s (%s)", e.Model, e.After.Round(100*time.Millisecond), e.Doing, e.Limit)
	if e.LastFailure != "" {
		s += "; it was retrying after: " + e.LastFailure
	}
	if e.Kept > 0 {
		s += fmt.Sprintf("; the partial download (%s) is kept and the next call resumes it", describeSize(e.Kept))
	}
	return s
}

func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

func timedOut(ctx context.Context, name string, start time.Time, limit time.Duration, doing string, kept int64) *TimeoutError {
	which := "the call's time limit"
	if errors.Is(context.Cause(ctx), errHealLimit) {
		which = fmt.Sprintf("[budget] heal = %s", limit)
	}
	return &TimeoutError{Model: name, After: time.Since(start), Limit: which, Doing: doing, Kept: kept}
}

// verify hashes a pinned file whose stamp no longer matches.
func (h *Healer) verify(tool string, m *manifest.Model, path string) (verify.Status, error) {
	h.say("guard: verifying %s (sha256 of %s)", filepath.Base(path), describeSize(m.Size))
	start := time.Now()
	st, _, err := verify.Full(spec(m, path), h.stampDir())
	ev := heallog.Event{Event: heallog.ModelVerify, Tool: tool, Target: path, Bytes: m.Size,
		DurationMS: time.Since(start).Milliseconds(), Result: "ok"}
	if err != nil || !st.Healthy() {
		ev.Level, ev.Result, ev.Reason = "warn", "failed", string(st)
		if err != nil {
			ev.Reason = err.Error()
		}
	}
	h.event(ev)
	if err != nil {
		return st, fmt.Errorf("verify model %s: %w", filepath.Base(path), err)
	}
	return st, nil
}

// download fetches m to dest, the file path names. Failures that cost a
// download are remembered.
func (h *Healer) download(ctx context.Context, tool string, m *manifest.Model, path, dest string, st verify.Status) error {
	name := filepath.Base(path)
	if len(m.URLs) == 0 {
		return fmt.Errorf("model %s is %s and the manifest gives no urls to download it from", name, describeStatus(st))
	}
	dir := filepath.Dir(dest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("heal model %s: %w", name, err)
	}
	if err := checkSpace(dir, dest+".partial", m.Size); err != nil {
		h.event(heallog.Event{Level: "error", Event: heallog.ModelDownload, Tool: tool, Target: path, Result: "failed", Reason: err.Error()})
		return fmt.Errorf("heal model %s: %w", name, err)
	}
	if kept := fetch.PartialBytes(dest); kept > 0 && (m.Size <= 0 || kept < m.Size) {
		h.say("guard: model %s is %s; resuming a partial download (%s of %s)", name, describeStatus(st), describeSize(kept), describeSize(m.Size))
	} else {
		h.say("guard: model %s is %s; downloading %s", name, describeStatus(st), describeSize(m.Size))
	}
	start := time.Now()
	urls, client, declared, refused := h.sources(ctx, m)
	for _, why := range refused {
		h.say("guard: model %s: %s", name, why)
		h.event(heallog.Event{Level: "warn", Event: heallog.ModelDownload, Tool: tool, Target: path, Result: "failed", Reason: why})
	}
	sha := m.SHA256
	if sha == "" {
		sha = declared // an unpinned model is checked against what its registry addresses it by
	}
	if len(urls) == 0 {
		err := fmt.Errorf("every url was refused: %s", strings.Join(refused, "; "))
		h.event(heallog.Event{Level: "error", Event: heallog.ModelDownload, Tool: tool, Target: path, Result: "failed", Reason: err.Error()})
		return fmt.Errorf("heal model %s: %w", name, err)
	}
	res, err := fetch.Fetch(ctx, fetch.Request{
		URLs: urls, Dest: dest, Size: m.Size, SHA256: sha,
		Token: h.Token, Client: client, Progress: h.Stderr, Pace: h.Pace,
		Backoff: h.FetchBackoff, RateWindow: h.RateWindow, Connections: m.Connections,
		OnRetry: func(url string, attempt int, err error) {
			// A Retry-After or a back-off can be long: say why nothing moves.
			h.say("guard: download of %s: %v; trying again", name, err)
			h.event(heallog.Event{Level: "warn", Event: heallog.ModelDownload, Tool: tool, Target: path,
				Result: "retry", Attempt: attempt, Reason: err.Error()})
		},
	})
	if errors.Is(err, fetch.ErrBusy) {
		return err // not a failure: the caller waits for the other download
	}
	ev := heallog.Event{Event: heallog.ModelDownload, Tool: tool, Target: path, Bytes: res.Bytes,
		DurationMS: time.Since(start).Milliseconds(), Attempt: res.Attempts, Connections: res.Connections, Result: "ok"}
	if err != nil {
		ev.Level, ev.Result, ev.Reason = "error", "failed", err.Error()
		if ctx.Err() == context.DeadlineExceeded {
			ev.Level, ev.Result, ev.Reason = "warn", "timeout", "timed out"
		}
		if all := (*fetch.SourcesError)(nil); errors.As(err, &all) && all.Stalled() && ctx.Err() == nil {
			ev.Level = "warn"
			h.event(ev)
			return &StalledError{Model: name, Err: err, Kept: fetch.PartialBytes(dest)}
		}
		h.event(ev)
		if all, ok := remember(ctx, err); ok {
			backoff := cmpDur(h.FailureBackoff, DefaultFailureBackoff)
			if all.Offline() {
				backoff = min(backoff, OfflineBackoff)
			}
			h.rememberFailure(path, m, err.Error(), backoff)
		}
		return fmt.Errorf("heal model %s: %w", name, err)
	}
	ev.Reason = "from " + res.URL
	h.event(ev)
	h.forgetFailure(path)
	by := res.DeclaredBy // the url whose X-Linked-Etag it matched, if any
	if m.SHA256 != "" {
		by = "manifest"
	}
	// Stamped by both names, so a call by either finds it checked.
	for _, p := range uniq(path, dest) {
		if err := verify.WriteStamp(h.stampDir(), p, res.SHA256, by); err != nil {
			// The file is good; without a stamp the next call hashes it once.
			h.say("guard: %v", err)
		}
	}
	return nil
}

// StalledError is a download whose every source stalled (sent nothing
// for a whole stall window): not asked again in this heal, and not
// remembered as a failure, since it passes as a timeout does. The partial
// file is kept for the next call to resume. A call exits 75 for it: call
// again later.
type StalledError struct {
	Model string // file name
	Err   error  // the download's, naming each source
	Kept  int64  // bytes of the partial file kept
}

func (e *StalledError) Error() string {
	s := fmt.Sprintf("heal model %s: the download stalled and was stopped: %v", e.Model, e.Err)
	if e.Kept > 0 {
		s += fmt.Sprintf("; the partial download (%s) is kept and the next call resumes it", describeSize(e.Kept))
	} else {
		s += "; the next call tries again"
	}
	return s
}

func (e *StalledError) Unwrap() error { return e.Err }

// Passing says the heal ended for a trouble that passes (healjob.Later).
func (e *StalledError) Passing() bool { return true }

// remember reports whether a failure is worth remembering: every url was
// tried and failed, which cost downloads and would cost them again. A full
// disk or a partial file guard cannot use is this machine's trouble, cheap
// to find again and fixed by the person, and a cancelled call (Ctrl-C) or
// one that ran out of time says nothing about the sources. Nor is a
// failure remembered whose every source served other bytes than its own
// address names (fetch.SourcesError.Damaged: a tampered OCI blob): its
// repair keeps the address and every header, so only asking again can see
// it, and a memory would outlive the repair (docs/decisions.md, "A failed
// download's memory and the source's repair").
func remember(ctx context.Context, err error) (*fetch.SourcesError, bool) {
	var all *fetch.SourcesError
	return all, ctx.Err() == nil && errors.As(err, &all) && !all.Damaged()
}

func (h *Healer) event(e heallog.Event) {
	if h.Log != nil {
		h.Log(e)
	}
}

func (h *Healer) say(format string, args ...any) {
	if h.Stderr != nil {
		fmt.Fprintf(h.Stderr, format+"\n", args...)
	}
}

// uniq is path, and dest when it names another file than path's spelling.
func uniq(path, dest string) []string {
	if abs, err := filepath.Abs(path); err == nil && abs == dest {
		return []string{path}
	}
	return []string{path, dest}
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func describeSize(n int64) string {
	switch {
	case n <= 0:
		return "(size unknown)"
	}
	return units.Bytes(n)
}

// describeStatus words a status for a sentence "model X is ...".
func describeStatus(st verify.Status) string {
	switch st {
	case verify.NotGGUF:
		return "not a GGUF file"
	case verify.HashMismatch:
		return "not the pinned file (its sha256 differs)"
	case verify.Truncated:
		return "truncated (its size differs)"
	}
	return string(st)
}
