package fetch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/models/fetch/ranged"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/guard/units"
)

// Copy buffers: a few of bufSize, allocated once per Fetch. Writes go to
// disk in chunks of at least flushAt bytes whatever size the network reads
// are, and each written chunk goes to the hashing goroutine.
const (
	buffers = 4
	bufSize = 1 << 20
	flushAt = 512 << 10
)

// download is the state of one Fetch across attempts and URLs. Invariant:
// the first off bytes of the partial file have been queued to p.
type download struct {
	r       Request
	name    string // base name of Dest, for messages
	partial string
	f       *os.File
	p       *pipe
	off     int64 // bytes in the partial file
	old     int64 // of those, bytes that came from an earlier run
	meta    meta
	want    string // the sha256 this url's file must have; "" = none
	// wantFrom is the url that declared want (X-Linked-Etag); "" when
	// want is the request's own.
	wantFrom string
	sum      string
	done     int64 // bytes of the file installed
	res      Result
	rep      *progress.Reporter
	// reserved is where the room fallocate gave the partial file in this
	// run ends (0: none asked for): asking again for room that is there
	// costs a tmpfs a pass over every page (40 to 60 ms for 256 MB).
	reserved int64

	// A download in parts (parallel.go): rt keeps the books of the
	// partial file while it is one; oneStream says this Fetch's source
	// answered ranges wrongly, so it is fetched in one stream. What only
	// an attempt in parts needs is a partsAttempt's.
	rt        *ranged.Tracker
	oneStream bool
}

// meta is the sidecar that lets a later run resume safely.
type meta struct {
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
}

func openDownload(r Request) (*download, error) {
	d := &download{r: r, name: filepath.Base(r.Dest), partial: r.Dest + ".partial"}
	if err := os.MkdirAll(filepath.Dir(r.Dest), 0o755); err != nil {
		return nil, fmt.Errorf("download %s: %w", d.name, err)
	}
	f, fi, err := openPartial(d.partial, r.Progress)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", d.name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("download %s: %w (%s)", d.name, ErrBusy, d.partial)
	}
	// The writer that held the lock may have renamed this very file into
	// place before letting go: then it is the finished model, not a
	// partial to write to.
	if cur, err := os.Lstat(d.partial); err != nil || !os.SameFile(cur, fi) {
		f.Close()
		return nil, fmt.Errorf("download %s: %w (%s)", d.name, ErrBusy, d.partial)
	}
	d.f = f
	d.p = newPipe(buffers, bufSize)
	if _, err := os.Lstat(d.partsPath()); err == nil {
		// A partial file in parts: its record, not its size, says
		// what is there.
		if err := d.adoptParts(fi.Size()); err != nil {
			d.close()
			return nil, err
		}
		return d, nil
	}
	if n := fi.Size(); n > 0 {
		if err := d.adopt(n); err != nil {
			d.close()
			return nil, err
		}
	}
	return d, nil
}

// adopt takes over a partial file left by an earlier run: re-hash what is
// there (a resume appends to it, so its bytes must be known), or discard it
// if it cannot belong to this file.
func (d *download) adopt(n int64) error {
	if d.r.Size > 0 && n > d.r.Size {
		return d.discard()
	}
	// Bytes that never start a model (an error page, another file) are
	// not worth resuming; finish checks the whole file's header again.
	head := make([]byte, min(n, 64))
	if k, _ := d.f.ReadAt(head, 0); d.sniff(head[:k], d.partial) != nil {
		if d.r.Progress != nil {
			fmt.Fprintf(d.r.Progress, "guard: discarded %s: it does not start like the file; starting the download over\n", d.partial)
		}
		return d.discard()
	}
	for d.off < n {
		b := d.p.buffer()
		k, err := d.f.ReadAt(b[:min(int64(len(b)), n-d.off)], d.off)
		if err != nil && !errors.Is(err, io.EOF) || k == 0 {
			d.p.giveBack(b)
			d.p.reset()
			d.off = 0
			return fmt.Errorf("download %s: re-hash partial file: %w", d.name, cmp.Or(err, io.ErrUnexpectedEOF))
		}
		d.p.hash(b[:k])
		d.off += int64(k)
	}
	d.old = n
	// A sidecar someone else planted only names an If-Range validator:
	// the server then resumes, as with no sidecar, or sends the whole
	// file. So it is read as any small file of guard's, with no owner
	// check.
	if b, err := state.ReadRegular(d.partial+".meta", maxMeta, true); err == nil {
		_ = json.Unmarshal(b, &d.meta) // a bad sidecar only costs the validator
	}
	return nil
}

// openPartial opens the partial file for reading and writing, never
// through a symlink. What guard cannot trust there (a link, a FIFO or a
// device, a file with other hard links or of another user, a file it may
// not open) is removed and a fresh file created exclusively in its place;
// what it cannot remove is an error naming the file and why.
func openPartial(path string, say io.Writer) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	why := ""
	switch {
	case err == nil:
		fi, serr := f.Stat()
		if serr != nil {
			f.Close()
			return nil, nil, fmt.Errorf("open partial file: %w", serr)
		}
		if why = untrusted(fi); why == "" {
			return f, fi, nil
		}
		f.Close()
	case errors.Is(err, syscall.ELOOP):
		why = "a symlink"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		why = "a file guard may not open (permission denied)"
	case errors.Is(err, syscall.EISDIR):
		why = "a folder"
	default:
		return nil, nil, fmt.Errorf("open partial file: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("the partial file %s is %s and guard cannot remove it (%v): remove it, or download to a folder you own", path, why, errors.Unwrap(err))
	}
	if say != nil {
		fmt.Fprintf(say, "guard: removed %s: it was %s; starting the download over\n", path, why)
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("create partial file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("create partial file: %w", err)
	}
	return f, fi, nil
}

// untrusted says why an open partial file must not be resumed, or "" when
// it is a plain file of this user's with no other name.
func untrusted(fi os.FileInfo) string {
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("not a plain file (%s)", fi.Mode().Type())
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return ""
	case st.Nlink > 1:
		return "a file with other hard links"
	case !state.Owned(fi):
		return fmt.Sprintf("another user's file (uid %d)", st.Uid)
	}
	return ""
}

// maxMeta bounds the sidecar guard reads back: it holds a URL and two
// validators.
const maxMeta = 16 << 10

// discard empties the partial file and forgets its validator.
func (d *download) discard() error {
	d.reserved = 0 // the truncation gives the room back
	if err := d.f.Truncate(0); err != nil {
		return &fatalError{fmt.Errorf("download %s: discard partial file: %w", d.name, err)}
	}
	d.p.reset()
	d.off, d.old = 0, 0
	d.meta = meta{}
	_ = os.Remove(d.partial + ".meta")
	d.dropParts()
	return nil
}

func (d *download) saveMeta(m meta) {
	d.meta = m
	if m.ETag == "" && m.LastModified == "" {
		_ = os.Remove(d.partial + ".meta")
		return
	}
	if b, err := json.Marshal(m); err == nil {
		// Replace, not WriteFile: a link planted at the name is replaced,
		// never followed.
		_ = state.Replace(d.partial+".meta", b, 0o644)
	}
}

// reserve asks the file system for the rest of the file up front, so a
// full disk is reported before the download rather than in the middle of
// it. KEEP_SIZE leaves the file's size at the bytes really written.
func (d *download) reserve() error {
	if d.r.Size <= max(d.off, d.reserved) {
		return nil
	}
	err := d.r.fallocate(int(d.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, d.off, d.r.Size-d.off)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return d.noSpace()
	}
	if err == nil {
		d.reserved = d.r.Size
	}
	return nil // unsupported: the writes will tell
}

// noSpace reports how much room the rest of the file needs. What is
// already downloaded stays for the next run to resume (docs/downloads.md,
// "A full disk"): the partial file with its .meta or .parts record; a
// partial file that holds nothing is removed by close.
func (d *download) noSpace() error {
	n := d.progress()
	need := int64(0)
	if d.r.Size > 0 {
		need = d.r.Size - n
	}
	if d.rt != nil {
		_ = d.rt.Save() // what every part wrote, as far as a sync covers it
	} else if d.off > 0 {
		// A write that ran out of room may have put some of its bytes
		// down: the file ends where the bytes counted (and hashed) end.
		d.reserved = 0
		_ = d.f.Truncate(d.off)
	}
	dir := filepath.Dir(d.r.Dest)
	return &fatalError{&SpaceError{Dir: dir, Need: need, Free: FreeSpace(dir)}}
}

// write appends b to the partial file and queues it to the hash; the pipe
// owns b from then on, whatever happens.
func (d *download) write(b []byte) error {
	if _, err := d.f.WriteAt(b, d.off); err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			// The bytes that fit are downloaded: kept, counted and
			// hashed like any others. WriteAt does not count a short
			// write that ends in an error; the file's size does.
			n := int64(0)
			if fi, serr := d.f.Stat(); serr == nil {
				n = min(max(fi.Size()-d.off, 0), int64(len(b)))
			}
			if n > 0 {
				d.p.hash(b[:n])
				d.off += n
				d.res.Bytes += n
			} else {
				d.p.giveBack(b)
			}
			return d.noSpace()
		}
		d.p.giveBack(b)
		return &fatalError{fmt.Errorf("write %s: %w", d.partial, err)}
	}
	d.p.hash(b)
	d.off += int64(len(b))
	d.res.Bytes += int64(len(b))
	return nil
}

// finish checks the complete single-stream partial file and renames it
// over Dest.
func (d *download) finish(src string) error {
	return d.install(src, d.off, d.p.sum)
}

// install checks the partial file, which holds n bytes, against the size,
// its header and sum (the sha256 of those bytes), and renames it over
// Dest.
func (d *download) install(src string, n int64, sum func() string) error {
	if err := d.f.Sync(); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			if d.rt == nil {
				// One stream keeps no record of what a sync covered:
				// after a failed one its bytes cannot be trusted.
				_ = d.discard()
			}
			return d.noSpace()
		}
		return &fatalError{fmt.Errorf("sync %s: %w", d.partial, err)}
	}
	fi, err := d.f.Stat()
	if err != nil {
		return &fatalError{fmt.Errorf("stat %s: %w", d.partial, err)}
	}
	if fi.Size() != n {
		_ = d.discard()
		return &fatalError{fmt.Errorf("%s holds %d bytes after writing %d; the file system lost data", d.partial, fi.Size(), n)}
	}
	if d.r.Size > 0 && n != d.r.Size {
		_ = d.discard()
		return &MismatchError{URL: src, What: "size", Want: fmt.Sprint(d.r.Size), Got: fmt.Sprint(n)}
	}
	// The header of the file as it will be, pinned or not: a resumed
	// partial's first bytes never passed the check at the start of a body.
	head := make([]byte, min(n, 64))
	k, err := d.f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return &fatalError{fmt.Errorf("read %s: %w", d.partial, err)}
	}
	if bad := d.sniff(head[:k], src); bad != nil {
		if err := d.discard(); err != nil {
			return err
		}
		return bad
	}
	got := sum()
	if pin := d.want; pin != "" && got != pin {
		if d.old > 0 {
			// The bytes from an earlier run may come from another
			// version of the file: start over once before blaming
			// the source.
			if err := d.discard(); err != nil {
				return err
			}
			return &restartError{reason: "the resumed file did not match its sha256; starting over"}
		}
		// Emptied, not kept: the next url starts over, and close
		// removes an empty partial.
		if err := d.discard(); err != nil {
			return err
		}
		return &MismatchError{URL: src, What: "sha256", Want: pin, Got: got, WantFrom: d.wantFrom, Named: namesDigest(src, pin)}
	}
	// Rename only the file written here: if the name now holds something
	// else (a link planted while the download ran), nothing is renamed.
	if cur, err := os.Lstat(d.partial); err != nil || !os.SameFile(cur, fi) {
		return &fatalError{fmt.Errorf("%s was replaced while the download ran; nothing was renamed into place", d.partial)}
	}
	if err := os.Rename(d.partial, d.r.Dest); err != nil {
		return &fatalError{fmt.Errorf("rename %s: %w", d.partial, err)}
	}
	// Closed (and unlocked) only after the rename, so a waiting download
	// never takes the finished file for its partial. It was synced above:
	// closing cannot lose its bytes.
	_ = d.f.Close()
	d.f = nil
	_ = os.Remove(d.partial + ".meta")
	d.dropParts()
	if err := syncDir(filepath.Dir(d.r.Dest)); err != nil {
		return &fatalError{err}
	}
	d.sum, d.done = got, n
	return nil
}

// ErrBusy is matched (errors.Is) by a Fetch that found another download
// writing the same partial file. It says nothing about the sources; the
// caller waits (WaitIdle) and checks the file again.
var ErrBusy = errors.New("another download is writing this file")

// WaitIdle waits until no download writes dest's partial file, or ctx
// ends. onWait is called once if it has to wait at all; waited says it
// did, so the caller checks dest again before downloading.
func WaitIdle(ctx context.Context, dest string, onWait func()) (waited bool, err error) {
	f, err := os.OpenFile(dest+".partial", os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false, nil // no partial (or none guard can use): nobody to wait for
	}
	defer f.Close()
	// What openPartial would replace (a FIFO, another user's file, a file
	// with other names) is no download of guard's, whoever locks it.
	if fi, err := f.Stat(); err != nil || untrusted(fi) != "" {
		return false, nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if err == nil {
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
			return waited, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return waited, nil // no lock to wait on: let the download find out
		}
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-tick.C:
		}
	}
}

// close releases the partial file (and its lock). An empty partial file is
// removed: it holds nothing worth resuming.
func (d *download) close() {
	d.p.close()
	if d.f == nil {
		return
	}
	if d.rt != nil {
		_ = d.rt.Save() // best effort: what it cannot save is fetched again
		d.rt.Close()
	}
	if d.progress() == 0 {
		_ = os.Remove(d.partial)
		_ = os.Remove(d.partial + ".meta")
		d.dropParts()
	}
	d.f.Close()
	d.f = nil
}

// syncDir makes a rename durable: without it a crash can leave the old
// directory entry.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func (d *download) startProgress(total int64) {
	if d.r.Progress == nil {
		return
	}
	if d.rep == nil {
		d.rep = progress.Start(d.r.Progress, "downloading "+d.name, total, d.r.Pace)
	}
	d.rep.SetBase(d.progress())
}

func (d *download) stopProgress(ok bool) {
	if d.rep == nil {
		return
	}
	final := ""
	if ok {
		final = fmt.Sprintf("guard: downloaded %s (%s)", d.name, units.Bytes(d.done))
		if d.res.Connections > 1 {
			final = fmt.Sprintf("guard: downloaded %s (%s over %s)", d.name, units.Bytes(d.done), units.Count(d.res.Connections, "connection", "connections"))
		}
	}
	d.rep.Stop(final)
	d.rep = nil
}

// namesDigest reports whether the url raw names sum as its own digest: its
// last path element is sha256:SUM, as an OCI blob's address is.
func namesDigest(raw, sum string) bool {
	u, err := url.Parse(raw)
	return err == nil && sum != "" && strings.EqualFold(path.Base(u.Path), "sha256:"+sum)
}
