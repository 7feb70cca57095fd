// Package ranged keeps the books of a partial file that is filled by byte
// ranges in any order, as a download over several connections fills it.
//
// The file is cut into a fixed grid of parts. A Tracker hands out the parts
// still to fetch (lowest first, so the filled area stays near one front),
// writes what arrives for each at its place, and keeps two things true:
//
//   - The record beside the file (Record, JSON) never says more bytes of a
//     part are done than are on disk: it is saved only after an fdatasync
//     that covers every byte it counts, so neither a SIGKILL nor a power cut
//     can mark a range complete that is not there. A resume continues each
//     part from its record; what was written after the last save is fetched
//     again. A disk that fills up does not stop the last save: a file the
//     size of a record is kept beside it (Room) and given up for that save
//     once no part is being written.
//   - The sha256 runs over the contiguous prefix of the file while the parts
//     fill in (read back from the file, one buffer), so the sum is ready
//     moments after the last byte instead of one whole re-read later.
//
// Memory does not grow with the file: one read buffer for the hash and
// whatever the caller's writers hold.
package ranged

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/state"
)

// Version is the record format; a record of another version is not
// resumed.
const Version = 1

// Record is what is saved beside the partial file: the grid, the source's
// validators, and how many bytes from each part's start are on disk.
type Record struct {
	Version      int     `json:"version"`
	Size         int64   `json:"size"`
	Part         int64   `json:"part"` // bytes per part; the last may be shorter
	ETag         string  `json:"etag,omitempty"`
	LastModified string  `json:"last_modified,omitempty"`
	Done         []int64 `json:"done"`
}

// Validator is what an If-Range sends to resume this file: its ETag, else
// its Last-Modified, else "".
func (r Record) Validator() string {
	if r.ETag != "" {
		return r.ETag
	}
	return r.LastModified
}

// NewRecord is an empty record of size bytes cut into parts of part bytes.
func NewRecord(size, part int64) Record {
	n := (size + part - 1) / part
	return Record{Version: Version, Size: size, Part: part, Done: make([]int64, n)}
}

// partLen is the length of part i.
func (r *Record) partLen(i int) int64 {
	return min(r.Part, r.Size-int64(i)*r.Part)
}

// Valid reports why r cannot describe a partial file of size bytes, or nil.
func (r *Record) Valid(size int64) error {
	switch {
	case r.Version != Version:
		return fmt.Errorf("record version %d, want %d", r.Version, Version)
	case size <= 0 || r.Size != size:
		return fmt.Errorf("record of %d bytes, want %d", r.Size, size)
	case r.Part <= 0:
		return fmt.Errorf("record part size %d", r.Part)
	case int64(len(r.Done)) != (r.Size+r.Part-1)/r.Part:
		return fmt.Errorf("the record's part count is %d, want %d", len(r.Done), (r.Size+r.Part-1)/r.Part)
	}
	for i, d := range r.Done {
		if d < 0 || d > r.partLen(i) {
			return fmt.Errorf("record part %d done %d of %d", i, d, r.partLen(i))
		}
	}
	return nil
}

// Bytes is how many bytes the record counts as on disk.
func (r *Record) Bytes() int64 {
	var n int64
	for _, d := range r.Done {
		n += d
	}
	return n
}

// maxRecord bounds a record read back: a grid of 64-bit counts.
const maxRecord = 1 << 20

// Load reads the record at path. It is read as any small file of guard's:
// never through a symlink, bounded.
func Load(path string) (Record, error) {
	var r Record
	b, err := state.ReadRegular(path, maxRecord, true)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("read %s: %w", path, err)
	}
	return r, nil
}

// Save replaces the record at path (never through a symlink).
func Save(path string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return state.Replace(path, b, 0o644)
}

// SaveEvery is how many bytes are written between two saves of the
// record, or one part's bytes when parts are smaller. A kill loses at most
// this much plus what was written during one fdatasync, spread over the
// parts being fetched.
const SaveEvery = 8 << 20

// hashBuf is the one buffer the hash reads the file back with.
const hashBuf = 1 << 20

// Chunk is a part handed to one writer: bytes [Next, End) of the file are
// still to come, in order.
type Chunk struct {
	Index int
	Next  int64 // the file offset of the next byte
	End   int64 // one past the part's last byte
}

// Tracker fills one partial file by parts. Its methods are safe for
// concurrent use.
type Tracker struct {
	f    *os.File
	path string // the record's

	mu      sync.Mutex
	rec     Record // in memory: bytes written, not yet all synced
	claimed []bool
	written int64 // since the last save
	err     error // a failed save: the record stops moving

	saveMu sync.Mutex // one save at a time
	room   bool       // Room(path) holds room for one save on a full disk
	saving chan struct{}
	wake   chan struct{}
	hashed chan struct{} // closed when the whole file is hashed
	quit   chan struct{}
	wg     sync.WaitGroup
	h      hash.Hash
	at     atomic.Int64 // bytes hashed
	sum    string
	herr   error
	close  sync.Once
}

// New starts tracking f, whose record rec is saved at path (the caller
// saved it before writing any byte of f). The hash starts at once over
// what rec says is on disk.
func New(f *os.File, path string, rec Record) *Tracker {
	t := &Tracker{
		f: f, path: path, rec: rec, claimed: make([]bool, len(rec.Done)),
		saving: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		hashed: make(chan struct{}), quit: make(chan struct{}), h: sha256.New(),
	}
	t.rec.Done = append([]int64(nil), rec.Done...)
	t.room = keepRoom(Room(path), roomFor(rec))
	t.wg.Add(2)
	go t.hashLoop()
	go t.saveLoop()
	return t
}

// Claim hands out the lowest part nobody holds that is not complete.
func (t *Tracker) Claim() (Chunk, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, d := range t.rec.Done {
		if t.claimed[i] || d == t.rec.partLen(i) {
			continue
		}
		t.claimed[i] = true
		start := int64(i) * t.rec.Part
		return Chunk{Index: i, Next: start + d, End: start + t.rec.partLen(i)}, true
	}
	return Chunk{}, false
}

// Release gives a claimed part back, complete or not.
func (t *Tracker) Release(c Chunk) {
	t.mu.Lock()
	t.claimed[c.Index] = false
	t.mu.Unlock()
}

// ErrPastPart is a write that would run past the end of its part.
var ErrPastPart = errors.New("write past the end of the part")

// Write puts b at c.Next and moves c on. The caller owns b again when it
// returns.
func (t *Tracker) Write(c *Chunk, b []byte) error {
	if c.Next+int64(len(b)) > c.End {
		return ErrPastPart
	}
	if _, err := t.f.WriteAt(b, c.Next); err != nil {
		return err
	}
	c.Next += int64(len(b))
	t.mu.Lock()
	t.rec.Done[c.Index] = c.Next - int64(c.Index)*t.rec.Part
	t.written += int64(len(b))
	due := t.written >= min(SaveEvery, t.rec.Part)
	if due {
		t.written = 0
	}
	t.mu.Unlock()
	if due {
		poke(t.saving)
	}
	poke(t.wake)
	return nil
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Done is how many bytes are written, and whether that is all of them.
func (t *Tracker) Done() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.rec.Bytes()
	return n, n == t.rec.Size
}

// Record is a copy of the record as it stands in memory (bytes written,
// perhaps not yet synced).
func (t *Tracker) Record() Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.rec
	r.Done = append([]int64(nil), t.rec.Done...)
	return r
}

// Save syncs the file and then saves the record of what was written before
// the sync: the record never counts a byte the sync did not cover.
func (t *Tracker) Save() error {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	snap := t.Record()
	if err := unix.Fdatasync(int(t.f.Fd())); err != nil && !errors.Is(err, unix.EINVAL) {
		return t.failed(fmt.Errorf("sync %s: %w", t.f.Name(), err))
	}
	err := Save(t.path, snap)
	if err != nil && noRoom(err) && t.giveRoom() {
		err = Save(t.path, snap)
	}
	if err != nil {
		return t.failed(err)
	}
	return nil
}

// Room is the file beside the record at path that holds room for one
// save of it: when the writes fill the disk, the last save (once no part
// is being written, so no write takes the room first) removes it and
// writes the record where it was.
func Room(path string) string { return path + ".room" }

// roomFor is the room a save of rec needs: the record with every part
// complete (its longest form) and a block to spare, in whole 4 KiB blocks.
func roomFor(rec Record) int {
	full := rec
	full.Done = make([]int64, len(rec.Done))
	for i := range full.Done {
		full.Done[i] = rec.partLen(i)
	}
	b, _ := json.Marshal(full)
	return (len(b)/4096 + 2) * 4096
}

// keepRoom writes n zero bytes at path (what an earlier run left there
// removed first, a link itself and never what it names), so that the
// file system gives them blocks now; false, and nothing left behind, when
// it cannot.
func keepRoom(path string, n int) bool {
	_ = os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return false
	}
	_, err = f.Write(make([]byte, n))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return false
	}
	return true
}

// giveRoom removes the room kept for a save on a full disk, when there is
// one and no part is being written; true if it did.
func (t *Tracker) giveRoom() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.room || slices.Contains(t.claimed, true) {
		return false
	}
	t.room = false
	return os.Remove(Room(t.path)) == nil
}

func noRoom(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func (t *Tracker) failed(err error) error {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
	return err
}

// Err is the first failed save (in the background), if any.
func (t *Tracker) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *Tracker) saveLoop() {
	defer t.wg.Done()
	for {
		select {
		case <-t.quit:
			return
		case <-t.saving:
			_ = t.Save() // kept in t.err for the writers to see
		}
	}
}

// front is the end of the contiguous prefix written so far.
func (t *Tracker) front() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for i, d := range t.rec.Done {
		n += d
		if d < t.rec.partLen(i) {
			break
		}
	}
	return n
}

// hashLoop hashes the file from its start as far as the contiguous prefix
// reaches, reading it back (from the page cache, as it was just written).
func (t *Tracker) hashLoop() {
	defer t.wg.Done()
	buf := make([]byte, hashBuf)
	var at int64
	for {
		for f := t.front(); at < f; f = t.front() {
			k, err := t.f.ReadAt(buf[:min(int64(len(buf)), f-at)], at)
			if k > 0 {
				t.h.Write(buf[:k])
				at += int64(k)
				t.at.Store(at)
			}
			if err != nil && !errors.Is(err, io.EOF) || k == 0 {
				t.herr = fmt.Errorf("hash %s at byte %d: %w", t.f.Name(), at, cmpErr(err))
				close(t.hashed)
				return
			}
		}
		if at == t.rec.Size {
			t.sum = hex.EncodeToString(t.h.Sum(nil))
			close(t.hashed)
			return
		}
		select {
		case <-t.quit:
			return
		case <-t.wake:
		}
	}
}

func cmpErr(err error) error {
	if err == nil {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Hashed is how many bytes from the file's start the hash has taken in.
func (t *Tracker) Hashed() int64 { return t.at.Load() }

// Sum waits for the hash of the whole file; call it once every part is
// written.
func (t *Tracker) Sum() (string, error) {
	if _, all := t.Done(); !all {
		return "", errors.New("sum of an incomplete file")
	}
	poke(t.wake)
	select {
	case <-t.hashed:
	case <-t.quit:
		return "", errors.New("tracker closed")
	}
	return t.sum, t.herr
}

// Close stops the hash and the saves. It does not save the record: call
// Save first to keep what was written.
func (t *Tracker) Close() {
	t.close.Do(func() {
		close(t.quit)
		t.wg.Wait()
		t.mu.Lock()
		if t.room {
			t.room = false
			_ = os.Remove(Room(t.path))
		}
		t.mu.Unlock()
	})
}
