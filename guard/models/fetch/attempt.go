package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/guard/state"
)

var errStalled = errors.New("stalled")

// attempt makes one request (or one copy of a file:// source) and writes
// what it gets.
func (d *download) attempt(ctx context.Context, u *url.URL) error {
	if u.Scheme == "file" {
		return d.fromFile(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%s: unsupported url scheme %q (want https, http or file)", u.Redacted(), u.Scheme)
	}
	if d.r.Size > 0 && d.off == d.r.Size {
		return d.finish(u.Redacted()) // an earlier run got every byte
	}
	// The two ways of filling the one partial file: in parts (parallel.go)
	// or in one stream.
	if d.wantsParts() {
		return d.inParts(ctx, u)
	}
	return d.inOneStream(ctx, u)
}

// inOneStream makes one attempt in one stream: a whole file, or the rest
// of a single-stream partial, over one request.
func (d *download) inOneStream(ctx context.Context, u *url.URL) error {
	if err := d.reserve(); err != nil {
		return err
	}
	var from int64 = -1
	if d.off > 0 {
		from = d.off
	}
	c, err := d.open(ctx, u, u.Redacted(), from, -1, d.meta.validator())
	if err != nil {
		return err
	}
	defer c.close()
	return d.stream(ctx, c)
}

// stream receives a whole file, or the rest of a single-stream partial,
// over the one connection c.
func (d *download) stream(ctx context.Context, c *conn) error {
	total, err := d.accept(c.resp, c.src)
	if err != nil {
		return err
	}
	d.res.Connections = 1
	d.startProgress(total)
	if err := d.copy(c.w.reader(c.resp.Body), c.src); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.stalled(err)
	}
	c.w.stop()
	return d.finish(c.src)
}

// conn is one request under way: its response and the rate watch that
// covers it, from the request to the last byte (a server that accepts and
// never answers is as dead as one that trickles or stops in the middle).
type conn struct {
	src    string // the url asked, redacted
	resp   *http.Response
	actx   context.Context
	cancel context.CancelCauseFunc
	w      *rateWatch
	waited time.Duration // from the request to the answer's headers
}

// stalled turns err into a *StallError when the rate watch ended the
// request.
func (c *conn) stalled(err error) error {
	if errors.Is(context.Cause(c.actx), errStalled) {
		return &StallError{URL: c.src, Got: c.w.last(), Window: c.w.window, MinRate: c.w.min}
	}
	return err
}

func (c *conn) close() {
	if c.resp != nil {
		c.resp.Body.Close()
	}
	c.w.stop()
	c.cancel(nil)
}

// open sends a GET of u: of bytes from-to when from >= 0 (to < 0: to the
// end), guarded by If-Range when validator is set. src is how messages
// name it: the url the manifest gives, never a signed url it redirected
// to.
func (d *download) open(ctx context.Context, u *url.URL, src string, from, to int64, validator string) (*conn, error) {
	actx, cancel := context.WithCancelCause(ctx)
	c := &conn{src: src, actx: actx, cancel: cancel}
	c.w = watchRate(d.r.MinRate, d.r.RateWindow, func() { cancel(errStalled) })
	req, err := http.NewRequestWithContext(actx, http.MethodGet, u.String(), nil)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("%s: %w", c.src, err)
	}
	req.Header.Set("User-Agent", "guard (model heal)")
	// Identity: Go would otherwise ask for gzip and undo it, and a resume
	// offset must count the bytes of the file itself.
	req.Header.Set("Accept-Encoding", "identity")
	authorize(req, d.r.Token)
	if from >= 0 {
		rng := fmt.Sprintf("bytes=%d-", from)
		if to >= 0 {
			rng += fmt.Sprint(to)
		}
		req.Header.Set("Range", rng)
		if validator != "" {
			req.Header.Set("If-Range", validator)
		}
	}
	asked := time.Now()
	resp, err := d.r.Client.Do(req)
	c.waited = time.Since(asked)
	if err != nil {
		c.close()
		var re *redirectError
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.As(err, &re):
			return nil, re
		case offline(err):
			return nil, &OfflineError{URL: c.src, Err: unwrapURLError(err)}
		}
		return nil, c.stalled(&netError{fmt.Errorf("%s: %w", c.src, unwrapURLError(err))})
	}
	c.resp = resp
	return c, nil
}

// accept turns the response status into the offset the body starts at and
// the total size, or an error. It may discard the partial file (a 200 to a
// Range request is the whole file again).
func (d *download) accept(resp *http.Response, src string) (int64, error) {
	switch resp.StatusCode {
	case http.StatusOK:
		total := resp.ContentLength
		if err := d.checkTotal(src, total); err != nil {
			return 0, d.errorPage(resp.Body, src, err)
		}
		if d.off > 0 { // the server ignored the Range: this is the whole file again
			if err := d.discard(); err != nil {
				return 0, err
			}
		}
		d.saveMeta(meta{URL: src, ETag: strongETag(resp.Header.Get("ETag")), LastModified: resp.Header.Get("Last-Modified")})
		return total, nil
	case http.StatusPartialContent:
		start, _, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != d.off {
			from := d.off
			if err := d.discard(); err != nil {
				return 0, err
			}
			return 0, &restartError{reason: fmt.Sprintf("%s resumed at the wrong place (Content-Range %q for a request from byte %d); starting over",
				src, resp.Header.Get("Content-Range"), from)}
		}
		if err := d.checkTotal(src, total); err != nil {
			return 0, err
		}
		d.res.Resumed = true
		return total, nil
	case http.StatusRequestedRangeNotSatisfiable:
		from := d.off
		if err := d.discard(); err != nil {
			return 0, err
		}
		return 0, &restartError{reason: fmt.Sprintf("%s refused to resume from byte %d (416); starting over", src, from)}
	}
	return 0, statusError(resp, src, d.r.Token != "")
}

// errorPage looks at the first bytes of a source whose size is not the
// manifest's: an error page (HTML, "Entry not found", a Git-LFS pointer)
// is reported as what it is, not as a file to record with `guard manifest
// pin`, and it leaves the other urls to try.
func (d *download) errorPage(body io.Reader, src string, mismatch error) error {
	head := make([]byte, 512)
	n, _ := io.ReadFull(body, head)
	if err := d.sniff(head[:n], src); err != nil {
		return err
	}
	return mismatch
}

// checkTotal compares the size a server announces with the manifest's.
func (d *download) checkTotal(src string, total int64) error {
	if total >= 0 && d.r.Size > 0 && total != d.r.Size {
		return &MismatchError{URL: src, What: "size", Want: fmt.Sprint(d.r.Size), Got: fmt.Sprint(total)}
	}
	return nil
}

// statusError words a status that is not the file. have says whether
// HF_TOKEN is set; whether it went to the server that answered is on the
// request.
func statusError(resp *http.Response, src string, have bool) error {
	hadToken := resp.Request != nil && resp.Request.Header.Get("Authorization") != ""
	e := &HTTPError{URL: src, Status: resp.StatusCode}
	// A few bytes of the body say more than the status ("Entry not found").
	head := make([]byte, 256)
	n, _ := io.ReadFull(resp.Body, head)
	head = head[:n]
	gated := strings.EqualFold(resp.Header.Get("X-Error-Code"), "GatedRepo")
	switch {
	case gated:
		e.Hint = "the repository is gated: accept its terms on huggingface.co, then set HF_TOKEN to a token of that account"
	case resp.StatusCode == http.StatusUnauthorized && have && !hadToken:
		e.Hint = "the server wants credentials: HF_TOKEN goes only to huggingface.co over https, so this server did not get it"
	case resp.StatusCode == http.StatusUnauthorized && !hadToken:
		e.Hint = "the repository is private, gated or missing: set HF_TOKEN to a token that can read it"
	case resp.StatusCode == http.StatusUnauthorized:
		e.Hint = "HF_TOKEN was refused or cannot read this repository"
	case resp.StatusCode == http.StatusForbidden:
		e.Hint = "access denied"
		if !have {
			e.Hint += "; if the repository is gated or private, set HF_TOKEN"
		}
	case resp.StatusCode == http.StatusNotFound:
		e.Hint = "the file does not exist at this url; check the model's urls in the manifest"
		if strings.HasPrefix(string(head), "Entry not found") {
			e.Hint = `the server says "Entry not found": ` + e.Hint
		}
	case resp.StatusCode == http.StatusTooManyRequests:
		e.Hint = "rate limited"
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return e
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(min(s, 24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL may be "*",
// then total is -1).
func parseContentRange(v string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	s, e, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	start, err1 := strconv.ParseInt(s, 10, 64)
	end, err2 := strconv.ParseInt(e, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, 0, 0, false
	}
	total = -1
	if tot != "*" {
		t, err := strconv.ParseInt(tot, 10, 64)
		if err != nil || t <= end {
			return 0, 0, 0, false
		}
		total = t
	}
	return start, end, total, true
}

func strongETag(v string) string {
	if strings.HasPrefix(v, "W/") {
		return "" // a weak validator cannot guard a byte range
	}
	return v
}

func (m meta) validator() string {
	if m.ETag != "" {
		return m.ETag
	}
	return m.LastModified
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// fromFile copies a file:// source (a shared volume, a local mirror). It
// always starts over: a local copy is fast, and the partial may come from
// another source.
func (d *download) fromFile(u *url.URL) error {
	if u.Host != "" && u.Host != "localhost" {
		return fmt.Errorf("%s: a file url must name a local path (file:///path)", u)
	}
	// Non-blocking: a FIFO at the mirror's path must not hang the call.
	src, fi, err := state.OpenRegularStat(u.Path, false)
	switch {
	case errors.Is(err, state.ErrNotRegular):
		return fmt.Errorf("mirror %s is not a regular file", u.Path)
	case err != nil:
		return fmt.Errorf("open mirror %s: %w", u.Path, err)
	}
	defer src.Close()
	if err := d.checkTotal(u.String(), fi.Size()); err != nil {
		return d.errorPage(src, u.String(), err)
	}
	if d.off > 0 {
		if err := d.discard(); err != nil {
			return err
		}
	}
	if err := d.reserve(); err != nil {
		return err
	}
	d.res.Connections = 1
	d.startProgress(fi.Size())
	if err := d.copy(src, u.String()); err != nil {
		return err
	}
	return d.finish(u.String())
}

// copy writes body to the partial file from d.off on. A fresh file's first
// bytes are checked first: an error page must never be saved as the file.
func (d *download) copy(body io.Reader, src string) error {
	return d.copyUntil(body, src, d.r.Size, nil)
}

// errSlow ends a copyUntil whose slow said so.
var errSlow = errors.New("slower than one connection should be")

// copyUntil is copy of a body that ends at byte end of the file (0: the
// body's end), asking slow after each read, with the bytes it has then,
// whether to stop there (errSlow) once they are written.
func (d *download) copyUntil(body io.Reader, src string, end int64, slow func(got int64) bool) error {
	buf := d.p.buffer()
	defer func() {
		if buf != nil {
			d.p.giveBack(buf)
		}
	}()
	// flush hands the filled part of buf to write (which owns it from then
	// on) and takes a fresh buffer.
	flush := func(fill int) error {
		b := buf[:fill]
		buf = nil
		if err := d.write(b); err != nil {
			return err
		}
		buf = d.p.buffer()
		return nil
	}
	fill := 0
	if d.off == 0 {
		n, err := io.ReadAtLeast(body, buf, 64)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return &netError{fmt.Errorf("%s: %w", src, err)}
		}
		if err := d.sniff(buf[:n], src); err != nil {
			return err
		}
		fill = n
		if d.rep != nil {
			d.rep.Add(int64(n))
		}
		if err != nil { // the whole body was shorter than 64 bytes
			if fill > 0 {
				if err := flush(fill); err != nil {
					return err
				}
			}
			return d.checkEnd(src, end)
		}
	}
	for {
		n, err := body.Read(buf[fill:])
		if n > 0 {
			if d.r.Size > 0 && d.off+int64(fill+n) > d.r.Size {
				_ = d.discard() // not the file the manifest means
				return &MismatchError{URL: src, What: "size", Want: fmt.Sprint(d.r.Size), Got: fmt.Sprint("at least ", d.off+int64(fill+n))}
			}
			fill += n
			if d.rep != nil {
				d.rep.Add(int64(n))
			}
		}
		if fill >= flushAt || (err != nil && fill > 0) {
			if werr := flush(fill); werr != nil {
				return werr
			}
			fill = 0
		}
		if slow != nil && err == nil && slow(d.off+int64(fill)) {
			if fill > 0 {
				if werr := flush(fill); werr != nil {
					return werr
				}
			}
			return errSlow
		}
		if errors.Is(err, io.EOF) {
			return d.checkEnd(src, end)
		}
		if err != nil {
			return &netError{fmt.Errorf("%s: %w", src, err)}
		}
	}
}

// checkEnd makes sure a clean end of a body that should reach byte end
// (0: unknown) was not cut short by a server that sent no length.
func (d *download) checkEnd(src string, end int64) error {
	if end > 0 && d.off < end {
		return &shortError{url: src, got: d.off, want: end}
	}
	return nil
}

func (d *download) sniff(b []byte, src string) error {
	err := verify.ErrorBody(b)
	if err == nil && strings.HasSuffix(strings.ToLower(d.r.Dest), ".gguf") {
		err = verify.Header(b)
	}
	if err != nil {
		return &BodyError{URL: src, Err: err}
	}
	return nil
}
