package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-guard/guard/guard/models/fetch/ranged"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// A download in parts (docs/downloads.md, "Downloads in parts"): a file of
// known size whose source answers a Range with a 206 for exactly that
// range is fetched over several connections at once into one preallocated
// partial file, cut into parts that connections take lowest first. The
// record of the bytes each part has on disk is DEST.partial.parts
// (package ranged); a later run resumes every part from it. The sha256
// runs over the contiguous prefix as parts fill in.
const (
	DefaultConnections = manifest.DefaultConnections
	MaxConnections     = manifest.MaxConnections
	// Parts are about a quarter of a connection's share, so the filled
	// area stays near one front (the hash follows it) and a slow
	// connection holds up little; bounded so a request's first-byte wait
	// is small beside its transfer, and the record stays small.
	partsPerConn = 4
	minPart      = 4 << 20
	maxPart      = 64 << 20
	// partBuf is each connection's buffer: what it reads before a write.
	partBuf = 256 << 10
	// maxResolves bounds how often one part asks for a fresh redirect
	// after a 403 from the url it was sent to, without moving on.
	maxResolves = 3
)

func (d *download) partsPath() string { return d.partial + ".parts" }

// progress is how many bytes of the file are on disk (written, maybe not
// yet synced), in parts or in one stream.
func (d *download) progress() int64 {
	if d.rt != nil {
		n, _ := d.rt.Done()
		return n
	}
	return d.off
}

func (d *download) partSize() int64 {
	if d.r.PartSize > 0 {
		return d.r.PartSize
	}
	p := d.r.Size / int64(d.r.Connections*partsPerConn)
	return min(max(p, minPart), maxPart)
}

// wantsParts says whether the next attempt is a download in parts: one is
// under way, or a fresh download of a known size of at least two parts
// may become one. A single-stream partial is continued as one stream.
func (d *download) wantsParts() bool {
	if d.rt != nil {
		return true
	}
	return d.r.Connections > 1 && !d.oneStream && d.r.Size > 0 && d.off == 0 && d.r.Size > d.partSize()
}

// dropParts forgets a download in parts: the record goes, the tracker
// stops. The partial file itself is the caller's to empty or rename.
func (d *download) dropParts() {
	if d.rt != nil {
		d.rt.Close()
		d.rt = nil
	}
	_ = os.Remove(d.partsPath())
	_ = os.Remove(ranged.Room(d.partsPath())) // an earlier run's, killed
}

// adoptParts takes over a partial file in parts left by an earlier run
// whose file is size bytes, or discards it when its record does not
// describe it.
func (d *download) adoptParts(size int64) error {
	rec, err := ranged.Load(d.partsPath())
	if err == nil {
		err = rec.Valid(d.r.Size)
	}
	if err == nil {
		err = madeHere(rec, d.r.PartSize)
	}
	if err == nil {
		err = ownRecord(d.partsPath())
	}
	if err == nil && size != rec.Size {
		err = fmt.Errorf("the file holds %d bytes, the record says %d", size, rec.Size)
	}
	if err == nil && rec.Done[0] > 0 {
		head := make([]byte, min(rec.Done[0], 64))
		k, _ := d.f.ReadAt(head, 0)
		err = d.sniff(head[:k], d.partial)
	}
	if err != nil {
		if d.r.Progress != nil {
			fmt.Fprintf(d.r.Progress, "guard: discarded %s: %v; starting the download over\n", d.partial, err)
		}
		return d.discard()
	}
	d.rt = ranged.New(d.f, d.partsPath(), rec)
	d.old = rec.Bytes()
	return nil
}

// madeHere says why a valid record (ranged.Record.Valid) is not one guard
// would have written, or nil: its parts are of the size asked for (part,
// when a test sets one), else within minPart-maxPart, what partSize makes
// whatever the connections. A record of 64-byte parts is valid, but
// resumed as it is, it makes one request per 64 bytes: it was planted, or
// is another program's, and the download starts its parts afresh. Parts
// of a grid cannot overlap: each starts at its index times Part, and
// Valid keeps what each counts within it.
func madeHere(rec ranged.Record, part int64) error {
	switch {
	case part > 0 && rec.Part != part:
		return fmt.Errorf("its record has parts of %d bytes, not the %d asked for", rec.Part, part)
	case part <= 0 && (rec.Part < minPart || rec.Part > maxPart):
		return fmt.Errorf("its record has parts of %s, and guard makes parts of %s to %s", units.Bytes(rec.Part), units.Bytes(minPart), units.Bytes(maxPart))
	}
	return nil
}

// ownRecord says why the record at path is not this user's plain file,
// or nil: one another user wrote is not resumed, whatever it says.
func ownRecord(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("its record is not a plain file")
	case !state.Owned(fi):
		return fmt.Errorf("its record is another user's file")
	}
	return nil
}

// startParts turns a fresh download into one in parts: the record first
// (so a file without one is never taken for a finished single stream),
// then the whole file's room. rec may count the bytes the first answer
// wrote at the file's start: they are recorded once a sync covers them,
// after the room is there (a record of another size than its file is
// discarded).
func (d *download) startParts(rec ranged.Record) error {
	empty := rec
	empty.Done = make([]int64, len(rec.Done))
	if err := ranged.Save(d.partsPath(), empty); err != nil {
		return &fatalError{fmt.Errorf("download %s: %w", d.name, err)}
	}
	var err error
	if d.reserved >= rec.Size {
		err = d.f.Truncate(rec.Size) // the room is there: its size only
	} else {
		err = d.r.fallocate(int(d.f.Fd()), 0, 0, rec.Size)
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		// What the first answer wrote stays a single-stream partial.
		_ = os.Remove(d.partsPath())
		return d.noSpace()
	}
	if err != nil { // not supported here: a sparse file, the writes will tell
		if err := d.f.Truncate(rec.Size); err != nil {
			_ = os.Remove(d.partsPath())
			return &fatalError{fmt.Errorf("download %s: size partial file: %w", d.name, err)}
		}
	}
	d.rt = ranged.New(d.f, d.partsPath(), rec)
	if rec.Bytes() > 0 {
		_ = d.rt.Save() // a failed one leaves these bytes to fetch again
	}
	return nil
}

// partsAttempt is one attempt at a download in parts, shared by its
// workers: what only ranged parts need, beside the download whose partial
// file they fill.
type partsAttempt struct {
	d *download
	// rt keeps the books of the partial file; the workers share it, and
	// only inParts's goroutine changes d.rt, once they are all done.
	rt      *ranged.Tracker
	res     *resolver
	bytes   atomic.Int64 // fetched by the parts in this attempt
	retryMu sync.Mutex   // OnRetry is called by one part at a time
}

// inParts makes one attempt at a download in parts. A fresh one first
// asks for the first part alone (beginParts): the answer says whether the
// source serves ranges, and if it answers 200 the file comes in one stream
// on that very response.
func (d *download) inParts(ctx context.Context, u *url.URL) error {
	src := u.Redacted()
	res := &resolver{orig: u, cur: u}
	var first *conn
	if d.rt == nil {
		c, done, err := d.beginParts(ctx, u, src, res)
		if done {
			return err
		}
		first = c
	}
	rec := d.rt.Record()
	conns := d.partsUnderWay(rec)
	a := &partsAttempt{d: d, rt: d.rt, res: res}
	firstErr := a.run(ctx, first, conns)
	return a.end(ctx, src, rec.Size, firstErr)
}

// beginParts makes a fresh download's first request, a Range for the
// first part. It returns that connection, whose answer is part 0 of the
// download in parts now under way; or done, with the attempt's end, when
// the file came otherwise: in one stream on a 200, or after its first
// part alone (firstAlone).
func (d *download) beginParts(ctx context.Context, u *url.URL, src string, res *resolver) (first *conn, done bool, err error) {
	part := d.partSize()
	c, err := d.open(ctx, u, src, 0, part-1, "")
	if err != nil {
		return nil, true, err
	}
	rec, inParts, err := d.firstPart(c, part)
	if err != nil || !inParts {
		defer c.close()
		if err != nil {
			return nil, true, err
		}
		if err := d.reserve(); err != nil {
			return nil, true, err
		}
		return nil, true, d.stream(ctx, c) // a 200: the whole file, here and now
	}
	res.answered(c.resp)
	if d.r.FastConn >= 0 {
		// The room for one stream, before its first byte is kept.
		if err := d.reserve(); err != nil {
			c.close()
			return nil, true, err
		}
	}
	alone, err := d.firstAlone(c, rec)
	if err == nil && alone {
		c.close()
		return nil, true, d.rest(ctx, u, src)
	}
	if err == nil {
		err = d.switchToParts(rec)
	}
	if err != nil {
		c.close()
		return nil, true, err
	}
	return c, false, nil
}

// switchToParts makes the single-stream partial the first answer wrote
// into a download in parts, rec, which takes over from the byte that
// answer reached.
func (d *download) switchToParts(rec ranged.Record) error {
	rec.Done[0] = d.off
	if err := d.startParts(rec); err != nil {
		return err
	}
	_ = os.Remove(d.partial + ".meta") // the record holds the validators
	d.meta = meta{}
	d.p.reset() // the tracker hashes the file from its start
	d.off = 0
	return nil
}

// partsUnderWay is how many connections fetch the parts rec has left,
// said in the result and the progress line.
func (d *download) partsUnderWay(rec ranged.Record) int {
	left := 0
	for i, n := range rec.Done {
		if n < min(rec.Part, rec.Size-int64(i)*rec.Part) {
			left++
		}
	}
	conns := max(1, min(d.r.Connections, left))
	d.res.Connections = conns
	d.startProgress(rec.Size)
	if d.rep != nil {
		d.rep.SetStatus(units.Count(conns, "connection", "connections"))
	}
	if d.old > 0 {
		d.res.Resumed = true
	}
	return conns
}

// run fetches the parts a.rt has left over conns connections at once
// and returns the first error of any; first, when set, is the open answer
// for part 0, given to the first worker.
func (a *partsAttempt) run(ctx context.Context, first *conn, conns int) error {
	defer func() {
		if first != nil {
			first.close()
		}
	}()
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	fail := func(err error) {
		once.Do(func() { firstErr = err; cancel(err) })
	}
	for i := range conns {
		var c *conn
		var ch *ranged.Chunk
		if i == 0 && first != nil {
			// The first request's answer is for part 0: its worker
			// holds part 0 before any other can claim it.
			c0, ok := a.rt.Claim()
			if ok && c0.Index == 0 {
				c, ch, first = first, &c0, nil
			} else if ok {
				a.rt.Release(c0)
			}
		}
		wg.Go(func() {
			if err := a.worker(pctx, c, ch); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	a.d.res.Bytes += a.bytes.Swap(0)
	return firstErr
}

// end ends an attempt in parts whose workers are done, firstErr the
// first error of any: the file of size bytes is installed when every part
// is there, else what the parts wrote is kept, or discarded when it is
// not the file.
func (a *partsAttempt) end(ctx context.Context, src string, size int64, firstErr error) error {
	d, rt := a.d, a.rt
	if firstErr != nil {
		var (
			rs  *restartError
			bad *BodyError
		)
		if errors.As(firstErr, &rs) || errors.As(firstErr, &bad) {
			// Another version of the file, or not the file at all:
			// nothing of it is kept.
			if err := d.discard(); err != nil {
				return err
			}
		} else {
			_ = rt.Save() // keep what every part wrote
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return firstErr
	}
	n, all := rt.Done()
	if !all {
		return &shortError{url: src, got: n, want: size}
	}
	sum, err := rt.Sum()
	rt.Close() // no save may touch the file while it is renamed and closed
	if err != nil {
		return &fatalError{fmt.Errorf("download %s: %w", d.name, err)}
	}
	return d.install(src, n, func() string { return sum })
}

// firstPart reads the answer to a fresh download's first request, a Range
// for the first part: true, with the record of a download in parts of
// that size, when the source serves ranges; false when it is the whole
// file in one stream (a 200). A source that answers the range wrongly is
// fetched in one stream from the next attempt on.
func (d *download) firstPart(c *conn, part int64) (ranged.Record, bool, error) {
	resp := c.resp
	switch resp.StatusCode {
	case http.StatusOK:
		return ranged.Record{}, false, nil
	case http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		d.oneStream = true
		return ranged.Record{}, false, &restartError{reason: fmt.Sprintf("%s refused a range of its first %d bytes (416); fetching in one stream", c.src, part)}
	default:
		_, err := d.accept(resp, c.src) // the status's own error
		return ranged.Record{}, false, err
	}
	start, end, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
	if ok && total >= 0 {
		if err := d.checkTotal(c.src, total); err != nil {
			return ranged.Record{}, false, err
		}
	}
	if !ok || start != 0 || end != part-1 || total != d.r.Size || (resp.ContentLength >= 0 && resp.ContentLength != part) {
		d.oneStream = true
		return ranged.Record{}, false, &restartError{reason: fmt.Sprintf("%s answered a range of bytes 0-%d with Content-Range %q and length %d; fetching in one stream",
			c.src, part-1, resp.Header.Get("Content-Range"), resp.ContentLength)}
	}
	rec := ranged.NewRecord(d.r.Size, part)
	rec.ETag = strongETag(resp.Header.Get("ETag"))
	rec.LastModified = resp.Header.Get("Last-Modified")
	return rec, true, nil
}

// firstAlone reads the first part's body as one stream reads a file (its
// bytes hashed from the buffers they arrive in, never read back) while
// watching its rate. True: the whole part came at least FastConn bytes a
// second, so nothing caps one connection, and the rest of the file comes
// in one stream too (rest). False: as soon as the body is found slower
// (over probeWindow), or when it ended slower; the parts then take over
// from the byte it reached. Until then the partial file is a single-stream
// partial, its validators in .meta: a kill leaves what one stream resumes.
func (d *download) firstAlone(c *conn, rec ranged.Record) (bool, error) {
	fast := d.r.FastConn
	if fast < 0 {
		return false, nil
	}
	if fast == 0 {
		fast = DefaultFastConn
	}
	d.saveMeta(meta{URL: c.src, ETag: rec.ETag, LastModified: rec.LastModified})
	d.startProgress(rec.Size)
	part := min(rec.Part, rec.Size)
	start := time.Now()
	slow := func(got int64) bool {
		took := time.Since(start)
		return took >= probeWindow && float64(got) < float64(fast)*took.Seconds()
	}
	err := d.copyUntil(io.LimitReader(c.w.reader(c.resp.Body), part), c.src, part, slow)
	switch {
	case errors.Is(err, errSlow):
		return false, nil
	case err != nil:
		return false, c.stalled(err)
	}
	took := time.Since(start)
	return float64(d.off) >= float64(fast)*took.Seconds(), nil
}

// probeWindow is how long the first part's body is watched before the
// other connections join it: a body that brought fewer than FastConn bytes
// a second by then is held back by a cap (a CDN's, a server's) that more
// connections get around. One faster than that is limited by this machine
// (the hash, the disk) more than by the source, and more connections only
// add work (docs/downloads.md, "One connection first").
const probeWindow = 50 * time.Millisecond

// rest fetches the file after a first part that came fast, in one stream
// from the byte it reached (a Range guarded by If-Range with the first
// answer's validator). It asks u, the manifest's url, as any one stream
// does: a signed url it redirects to is signed afresh.
func (d *download) rest(ctx context.Context, u *url.URL, src string) error {
	if d.off == d.r.Size {
		return d.finish(src)
	}
	if err := d.reserve(); err != nil {
		return err
	}
	c, err := d.open(ctx, u, src, d.off, -1, d.meta.validator())
	if err != nil {
		return err
	}
	defer c.close()
	resumed := d.res.Resumed
	err = d.stream(ctx, c)
	d.res.Resumed = resumed // this run's own first part, not an earlier run's
	return err
}

// resolver is the url the parts are sent to: the one a redirect (a Hub
// url to a signed CDN url) led a request for the original to, shared by
// all parts. Until an answer says where the original leads (at the start
// of a resumed download, or once a 403 dropped an expired url), one
// request asks the original and the others wait for its answer instead of
// each asking it again.
type resolver struct {
	mu    sync.Mutex
	orig  *url.URL
	cur   *url.URL
	known bool // cur is where an answer to a request for orig came from
	// asking is closed when the request that asks orig has its answer;
	// nil while none is out.
	asking chan struct{}
}

// url is where the next request goes. ask says the caller's request is
// the one that asks orig: it must call answered once it has the answer or
// has failed.
func (r *resolver) url(ctx context.Context) (u *url.URL, ask bool, err error) {
	for {
		r.mu.Lock()
		if r.known {
			u := r.cur
			r.mu.Unlock()
			return u, false, nil
		}
		if r.asking == nil {
			r.asking = make(chan struct{})
			r.mu.Unlock()
			return r.orig, true, nil
		}
		wait := r.asking
		r.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, false, context.Cause(ctx)
		}
	}
}

// answered records where the request that asked orig ended up after
// redirects (resp nil: it failed, and the next request asks again) and
// lets the waiting requests go.
func (r *resolver) answered(resp *http.Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if resp != nil && resp.Request != nil && resp.Request.URL != nil {
		r.cur, r.known = resp.Request.URL, true
	}
	if r.asking != nil {
		close(r.asking)
		r.asking = nil
	}
}

// again drops a resolved url that u was (refused with a 403): the next
// request asks the original. It reports whether there was one to drop (or
// another request dropped it already).
func (r *resolver) again(u *url.URL) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u == nil || u.String() == r.orig.String() {
		return false
	}
	if r.known && r.cur.String() == u.String() {
		r.cur, r.known = r.orig, false
	}
	return true
}

// worker fills parts until none is left. c, if not nil, is the answer to
// the first part's request, already checked, and ch that part.
//
// Shortly before a part ends (when what is left of it should arrive
// within one wait for a first byte), the worker claims the next part and
// sends its request, so that the server's wait before the first byte
// overlaps the end of the transfer instead of following it: a worker then
// has a second request open for that moment (Connections counts workers).
func (a *partsAttempt) worker(ctx context.Context, c *conn, ch *ranged.Chunk) error {
	rt := a.rt
	buf := make([]byte, partBuf)
	if c != nil {
		// The first answer was asked for before the parts' context
		// existed: a failure of another part must end it too.
		fc := c
		stop := context.AfterFunc(ctx, func() { fc.cancel(context.Cause(ctx)) })
		defer stop()
	}
	var next *ahead
	defer func() {
		if next != nil { // asked for, never read: give it back
			<-next.done
			if next.c != nil {
				next.c.close()
			}
			rt.Release(next.ch)
		}
	}()
	askNext := func() {
		if next == nil {
			next = a.askAhead(ctx)
		}
	}
	for {
		var cerr error
		if ch == nil {
			if next != nil {
				<-next.done
				ch, c, cerr = &next.ch, next.c, next.err
				next = nil
			} else {
				n, ok := rt.Claim()
				if !ok {
					return nil
				}
				ch = &n
			}
		}
		err := a.fillPart(ctx, ch, c, cerr, buf, askNext)
		c = nil
		rt.Release(*ch)
		ch = nil
		if err != nil {
			return err
		}
	}
}

// ahead is the request for a worker's next part, sent before its current
// part ends; done is closed once c (and err) are set.
type ahead struct {
	ch   ranged.Chunk
	c    *conn
	err  error
	done chan struct{}
}

// askAhead claims the next part and sends its request on a goroutine of
// its own; nil when no part is left.
func (a *partsAttempt) askAhead(ctx context.Context) *ahead {
	ch, ok := a.rt.Claim()
	if !ok {
		return nil
	}
	next := &ahead{ch: ch, done: make(chan struct{})}
	go func() {
		defer close(next.done)
		next.c, next.err = a.openPart(ctx, &next.ch)
	}()
	return next
}

// openPart sends the request for the rest of part ch and checks its
// answer. On an error the conn, if any, is returned closed: its url says
// where a 403 came from.
func (a *partsAttempt) openPart(ctx context.Context, ch *ranged.Chunk) (*conn, error) {
	res := a.res
	u, ask, err := res.url(ctx)
	if err != nil {
		return nil, err
	}
	c, err := a.d.open(ctx, u, res.orig.Redacted(), ch.Next, ch.End-1, a.rt.Record().Validator())
	if ask {
		if err != nil {
			res.answered(nil)
		} else {
			res.answered(c.resp)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := a.acceptPart(c, ch); err != nil {
		c.close()
		return c, err
	}
	return c, nil
}

// fillPart fetches the rest of one part, with retries: a request that
// moved the part on does not use one up. c (or its error cerr) is the
// part's first request when it was sent already; askNext is called once a
// body is near its part's end.
func (a *partsAttempt) fillPart(ctx context.Context, ch *ranged.Chunk, c *conn, cerr error, buf []byte, askNext func()) error {
	d, res := a.d, a.res
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	failures, resolves := 0, 0
	for ch.Next < ch.End {
		var err error
		began := d.progress() // a stall is the source's when nothing came since
		switch {
		case cerr != nil:
			err, cerr = cerr, nil
		case c == nil:
			c, err = a.openPart(ctx, ch)
		}
		before := ch.Next
		if err == nil {
			err = a.readPart(ctx, c, ch, buf, askNext)
			c.close()
			if err == nil {
				c = nil
				continue
			}
		}
		asked := askedURL(c)
		c = nil
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ch.Next > before {
			failures, resolves = 0, 0
		}
		var h *HTTPError
		if errors.As(err, &h) && h.Status == http.StatusForbidden && resolves < maxResolves && res.again(asked) {
			resolves++ // a signed url that expired: ask the original again
			continue
		}
		var rs *restartError
		if errors.As(err, &rs) {
			return err
		}
		if errors.As(err, new(*StallError)) && d.progress() == began {
			// Not one connection held up while the others fill their
			// parts: nothing came from the source over the whole window.
			// It is not asked again in this Fetch (fetch.go, fromURL).
			return err
		}
		if failures, err = a.retry(ctx, err, failures); err != nil {
			return err
		}
	}
	return nil
}

// retry decides whether a part's request that failed with err, after
// failures failures that did not move the part on, is sent again: it
// returns the failures counted with this one once the back-off has passed,
// or the error that ends the part.
func (a *partsAttempt) retry(ctx context.Context, err error, failures int) (int, error) {
	d := a.d
	wait, ok := d.retryWait(err, failures)
	if !ok {
		return failures, err
	}
	failures++
	if failures > d.r.Retries {
		return failures, fmt.Errorf("gave up after %s: %w", units.Count(failures, "attempt", "attempts"), err)
	}
	if d.r.OnRetry != nil {
		a.retryMu.Lock() // one at a time, whichever part retries
		d.r.OnRetry(a.res.orig.Redacted(), d.res.Attempts, err)
		a.retryMu.Unlock()
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return failures, ctx.Err()
		case <-t.C:
		}
	}
	return failures, nil
}

// askedURL is the url c's answer came from (after redirects), or nil.
func askedURL(c *conn) *url.URL {
	if c == nil || c.resp == nil || c.resp.Request == nil {
		return nil
	}
	return c.resp.Request.URL
}

// acceptPart checks the answer to a part's request: a 206 for exactly the
// bytes asked, of the same file (size and validators). A 200 (the
// If-Range validator no longer matches, or ranges are no longer served),
// a 416 or another validator means the file changed: every part starts
// over. A Content-Range that is not the one asked is retried.
func (a *partsAttempt) acceptPart(c *conn, ch *ranged.Chunk) error {
	resp := c.resp
	rec := a.rt.Record()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK, http.StatusRequestedRangeNotSatisfiable:
		return restart(fmt.Sprintf("%s answered a range of bytes %d-%d with %d %s: the file changed or ranges are no longer served; starting over",
			c.src, ch.Next, ch.End-1, resp.StatusCode, http.StatusText(resp.StatusCode)))
	default:
		return statusError(resp, c.src, a.d.r.Token != "")
	}
	start, end, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
	if ok && total >= 0 && total != rec.Size {
		return restart(fmt.Sprintf("%s now serves %d bytes, not %d: the file changed; starting over", c.src, total, rec.Size))
	}
	if etag := strongETag(resp.Header.Get("ETag")); rec.ETag != "" && etag != "" && etag != rec.ETag ||
		rec.LastModified != "" && resp.Header.Get("Last-Modified") != "" && resp.Header.Get("Last-Modified") != rec.LastModified {
		return restart(fmt.Sprintf("%s changed during the download (ETag or Last-Modified); starting over", c.src))
	}
	if !ok || start != ch.Next || end != ch.End-1 || (resp.ContentLength >= 0 && resp.ContentLength != ch.End-ch.Next) {
		return &netError{fmt.Errorf("%s answered a range of bytes %d-%d with Content-Range %q and length %d",
			c.src, ch.Next, ch.End-1, resp.Header.Get("Content-Range"), resp.ContentLength)}
	}
	return nil
}

// restart is an answer that shows the file changed: the attempt ends,
// and partsAttempt.end drops the partial file once every connection has
// stopped.
func restart(reason string) error { return &restartError{reason: reason} }

// readPart copies a part's body to its place in the file, as far as the
// part goes. The first bytes of the file are checked first: an error page
// must never be saved as the file.
func (a *partsAttempt) readPart(ctx context.Context, c *conn, ch *ranged.Chunk, buf []byte, askNext func()) error {
	d, rt := a.d, a.rt
	body := io.LimitReader(c.w.reader(c.resp.Body), ch.End-ch.Next)
	fill := 0
	start, from := time.Now(), ch.Next
	// near says whether what is left of the part should arrive within
	// one wait for a first byte (this request's), at this body's rate so
	// far: the next request's wait then overlaps the end of this body,
	// and its bytes follow this one's instead of flowing beside them.
	near := func() bool {
		got, took := ch.Next-from, time.Since(start)
		if got <= 0 || took <= 0 {
			return false
		}
		left := time.Duration(float64(ch.End-ch.Next) / float64(got) * float64(took))
		return left <= c.waited+5*time.Millisecond
	}
	if ch.Next == 0 {
		n, err := io.ReadAtLeast(body, buf, int(min(64, ch.End)))
		if err == nil || n > 0 {
			if bad := d.sniff(buf[:n], c.src); bad != nil {
				return bad
			}
		}
		fill = n
		a.counted(n)
		if err != nil { // the body ended within its first bytes
			if n > 0 {
				if werr := rt.Write(ch, buf[:n]); werr != nil {
					return a.writeFailed(werr)
				}
			}
			if ch.Next == ch.End {
				return nil
			}
			return d.partEnded(ctx, c, ch, err)
		}
	}
	for {
		n, err := body.Read(buf[fill:])
		fill += n
		a.counted(n)
		if fill == len(buf) || (err != nil && fill > 0) {
			if werr := rt.Write(ch, buf[:fill]); werr != nil {
				return a.writeFailed(werr)
			}
			fill = 0
			if askNext != nil && near() {
				askNext()
				askNext = nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && ch.Next == ch.End {
				return nil
			}
			return d.partEnded(ctx, c, ch, err)
		}
	}
}

func (a *partsAttempt) counted(n int) {
	if n <= 0 {
		return
	}
	a.bytes.Add(int64(n))
	if a.d.rep != nil {
		a.d.rep.Add(int64(n))
	}
}

// partEnded words a body that ended (err) before its part did.
func (d *download) partEnded(ctx context.Context, c *conn, ch *ranged.Chunk, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &shortError{url: c.src, got: ch.Next, want: ch.End}
	}
	return c.stalled(&netError{fmt.Errorf("%s: %w", c.src, err)})
}

// writeFailed words a failed write of a part. A full disk keeps the
// partial file and its record: the download resumes once there is room.
func (a *partsAttempt) writeFailed(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return a.d.noSpace() // a.d.rt is a.rt
	}
	return &fatalError{fmt.Errorf("write %s: %w", a.d.partial, err)}
}

// PartialBytes is how many bytes of dest a partial download holds: what
// the record of a download in parts counts (its file is preallocated at
// the full size), else the partial file's size; 0 when there is none or
// it is not a plain file.
func PartialBytes(dest string) int64 {
	fi, err := os.Lstat(dest + ".partial")
	if err != nil || !fi.Mode().IsRegular() {
		return 0
	}
	if _, err := os.Lstat(dest + ".partial.parts"); err == nil {
		rec, err := ranged.Load(dest + ".partial.parts")
		if err != nil || rec.Valid(rec.Size) != nil || rec.Size != fi.Size() {
			return 0 // the next download discards it
		}
		return rec.Bytes()
	}
	return fi.Size()
}
