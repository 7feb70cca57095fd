// Package fetch downloads one file, resumably and atomically.
//
// Bytes go to DEST.partial beside the target and are hashed as they are
// written. An interrupted download resumes with a Range request (guarded by
// If-Range when the server gave a validator, kept in DEST.partial.meta),
// after the partial has been re-hashed. Only a complete file whose size and
// sha256 match what was asked for is fsynced and renamed over DEST, so DEST
// is never a half-written or wrong file. Error pages (HTML, JSON, Hugging
// Face's "Entry not found", Git-LFS pointers) are refused on their first
// bytes. A source that serves another size or hash than the manifest's is
// not retried: the next url is tried (a stale mirror serving another
// version is normal), and when every url fails the error names each.
//
// Nothing planted beside DEST is followed: the partial file and its
// sidecar are opened with O_NOFOLLOW, and what guard cannot trust there is
// removed, never written through or renamed into place.
package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/units"
)

// Request says what to download and how hard to try.
type Request struct {
	URLs   []string // tried in order; http, https or file
	Dest   string
	Size   int64  // exact bytes; 0 = unknown
	SHA256 string // hex; "" = not pinned
	Token  string // bearer token (HF_TOKEN), sent only to huggingface.co over https

	Client   *http.Client // nil = DefaultClient()
	Progress io.Writer    // where progress lines go (stderr); nil = none
	// Pace is how often a progress line is printed off a terminal (0:
	// progress.DefaultEvery), or who observes it instead (a detached heal).
	Pace    progress.Pace
	Retries int // per URL; 0 = 5, negative = none
	Backoff time.Duration
	// MinRate (bytes/s) and RateWindow are the stall rule: an attempt
	// that got fewer than MinRate*RateWindow bytes in the last RateWindow
	// (counted from the request on) is dropped and retried.
	MinRate    int64
	RateWindow time.Duration
	OnRetry    func(url string, attempt int, err error)
	// Connections is how many ranged requests may fetch the file at once
	// (parallel.go); 0 = DefaultConnections, 1 = one stream. More than
	// one is used only when Size is known and the source answers a Range
	// with a 206 for exactly that range.
	Connections int
	// FastConn (bytes/s): a fresh download whose first part arrives at
	// least this fast over one connection is finished in one stream
	// (parallel.go, firstAlone); 0 = DefaultFastConn, negative = in
	// parts whatever the rate.
	FastConn int64
	// PartSize is the bytes of one part of a download in parts; 0 = by
	// the size (partSize). Tests make it small.
	PartSize int64

	// fallocate asks the file system for a file's room: unix.Fallocate
	// when nil; the package's tests count the calls.
	fallocate func(fd int, mode uint32, off, length int64) error
}

// Result describes a finished download.
type Result struct {
	URL     string // the source that served the file
	Bytes   int64  // fetched in this run (not counting a resumed partial)
	Resumed bool   // a partial file was continued
	// Connections is how many connections fetched the file at once in
	// the attempt that finished it: 1 for one stream.
	Connections int
	SHA256      string
	Attempts    int
	// DeclaredBy is the url whose declared sha256 (X-Linked-Etag) the
	// file was checked against, when the request gave none; "" otherwise.
	DeclaredBy string
}

// Defaults for the zero fields of a Request.
const (
	DefaultRetries    = 5
	DefaultBackoff    = time.Second
	DefaultMinRate    = 1024 // bytes/s
	DefaultRateWindow = 30 * time.Second
	maxBackoff        = 2 * time.Minute
	// DefaultFastConn is about a gigabit a second: a source that gives
	// one connection that much is not capping it.
	DefaultFastConn = 128 << 20
)

// Fetch downloads the first URL that works into r.Dest. The caller must not
// run two Fetches of one Dest at once (guard holds a lock); Fetch refuses a
// partial file another process is writing.
func Fetch(ctx context.Context, r Request) (Result, error) {
	if len(r.URLs) == 0 {
		return Result{}, fmt.Errorf("download %s: no url to download from", r.Dest)
	}
	r = withDefaults(r)
	d, err := openDownload(r)
	if err != nil {
		return Result{}, err
	}
	defer d.close()

	var errs []error
	for _, raw := range r.URLs {
		err := d.fromURL(ctx, raw)
		if err == nil {
			d.res.URL = raw
			d.res.SHA256 = d.sum
			d.res.DeclaredBy = d.wantFrom
			d.stopProgress(true)
			return d.res, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || stopsAll(err) {
			d.stopProgress(false)
			return d.res, fmt.Errorf("download %s: %w", d.name, errors.Join(errs...))
		}
	}
	d.stopProgress(false)
	return d.res, &SourcesError{Name: d.name, Errs: errs}
}

// SourcesError is a download for which every url was tried and failed:
// the only failure that says something about the sources (Fetch's other
// errors are this machine's: the disk, the partial file, a cancelled or
// timed-out context).
type SourcesError struct {
	Name string // the file's base name
	Errs []error
}

func (e *SourcesError) Error() string {
	if len(e.Errs) == 1 {
		return fmt.Sprintf("download %s: %v", e.Name, e.Errs[0])
	}
	return fmt.Sprintf("download %s: every url failed:\n%v", e.Name, errors.Join(e.Errs...))
}

func (e *SourcesError) Unwrap() []error { return e.Errs }

// Offline reports whether every url failed because this machine seems to
// be offline.
func (e *SourcesError) Offline() bool {
	for _, err := range e.Errs {
		var o *OfflineError
		if !errors.As(err, &o) {
			return false
		}
	}
	return len(e.Errs) > 0
}

// Stalled reports whether every url failed by stalling (StallError): a
// passing trouble of the sources, not one to remember, and the partial
// file is kept for the next try.
func (e *SourcesError) Stalled() bool {
	for _, err := range e.Errs {
		if !errors.As(err, new(*StallError)) {
			return false
		}
	}
	return len(e.Errs) > 0
}

// Damaged reports whether every url failed by serving other bytes than
// it names or declares itself (MismatchError.Damaged): the sources are to
// be repaired, and nothing in their headers will show when they are.
func (e *SourcesError) Damaged() bool {
	for _, err := range e.Errs {
		var m *MismatchError
		if !errors.As(err, &m) || !m.Damaged() {
			return false
		}
	}
	return len(e.Errs) > 0
}

func withDefaults(r Request) Request {
	if r.Client == nil {
		r.Client = DefaultClient()
	}
	r.Client = withRedirectRules(r.Client, r.Token)
	if r.Retries == 0 {
		r.Retries = DefaultRetries
	}
	if r.Retries < 0 {
		r.Retries = 0
	}
	if r.Backoff <= 0 {
		r.Backoff = DefaultBackoff
	}
	if r.MinRate <= 0 {
		r.MinRate = DefaultMinRate
	}
	if r.RateWindow <= 0 {
		r.RateWindow = DefaultRateWindow
	}
	if r.Connections <= 0 {
		r.Connections = DefaultConnections
	}
	r.Connections = min(r.Connections, MaxConnections)
	if r.fallocate == nil {
		r.fallocate = unix.Fallocate
	}
	return r
}

// stopsAll reports errors that no other URL can fix: this machine's.
func stopsAll(err error) bool {
	var f *fatalError
	return errors.As(err, &f) || errors.Is(err, ErrNoSpace)
}

// fromURL tries one URL, with retries. An attempt that moved the download
// forward does not use up a retry: a link that drops every few hundred MB
// still finishes. A stall (StallError) is not retried: the source is not
// asked again in this Fetch (docs/decisions.md, "Downloads: a source that stalls").
func (d *download) fromURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("parse url %q: %w", raw, err)
	}
	if err := d.declared(ctx, raw); err != nil {
		return err
	}
	failures := 0
	var last error // the failure the current attempt is a retry of
	stopped := func() error {
		if last == nil {
			return fmt.Errorf("%s: %w", raw, context.Cause(ctx))
		}
		return &StoppedError{URL: u.Redacted(), Cause: context.Cause(ctx), Last: last}
	}
	for {
		d.res.Attempts++
		before := d.progress()
		err := d.attempt(ctx, u)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return stopped()
		}
		if st := (*StallError)(nil); errors.As(err, &st) {
			// A source that sent nothing for a whole window is frozen
			// or gone: asked again, it holds the heal for another
			// window each time. It is not asked again in this Fetch;
			// the next url is tried, and the partial file stays.
			return err
		}
		wait, ok := d.retryWait(err, failures)
		if !ok {
			return err
		}
		if d.progress() > before {
			failures = 0
		} else {
			failures++
		}
		if failures > d.r.Retries {
			return fmt.Errorf("gave up after %s: %w", units.Count(failures, "attempt", "attempts"), err)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fmt.Errorf("%w (retrying would pass the heal time limit)", err)
		}
		if d.r.OnRetry != nil {
			d.r.OnRetry(raw, d.res.Attempts, err)
		}
		last = err
		if wait > 0 {
			if d.rep != nil {
				d.rep.Wait(fmt.Sprintf("retrying in %s", wait.Round(100*time.Millisecond)))
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return stopped()
			case <-t.C:
			}
		}
	}
}

// StoppedError is a download its context stopped while it was retrying
// (during the back-off or the next attempt): the time ran out, and Last is
// the failure guard was retrying after, which is what the user needs to
// know. It matches its Cause (the context's), so a deadline still reads as
// one.
type StoppedError struct {
	URL   string // redacted
	Cause error  // context.Cause of the stop
	Last  error  // the failed attempt before the stop
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("%s: %v, retrying after: %v", e.URL, e.Cause, e.Last)
}

func (e *StoppedError) Unwrap() error { return e.Cause }

// retryWait says whether err is worth another attempt on the same URL and
// how long to wait first: the server's Retry-After if it gave one, else a
// jittered exponential back-off.
func (d *download) retryWait(err error, failures int) (time.Duration, bool) {
	var (
		h  *HTTPError
		rs *restartError
		st *StallError
		sh *shortError
	)
	switch {
	case stopsAll(err), errors.As(err, new(*MismatchError)):
		return 0, false
	case errors.As(err, &rs):
		return 0, true
	case errors.As(err, &h):
		if !h.Temporary() {
			return 0, false
		}
		return max(h.RetryAfter, backoff(d.r.Backoff, failures)), true
	case errors.As(err, &st), errors.As(err, &sh):
		return backoff(d.r.Backoff, failures), true
	case errors.As(err, new(*BodyError)):
		return 0, false
	case isNetError(err):
		return backoff(d.r.Backoff, failures), true
	}
	return 0, false
}

func backoff(base time.Duration, failures int) time.Duration {
	d := base << min(failures, 10)
	d = min(d, maxBackoff)
	// Jitter between 0.5x and 1.5x so that many sandboxes hit by one
	// outage do not come back in step.
	return d/2 + rand.N(d+1)
}
