package promptcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// Stats describes the cache for `guard cache stats`.
type Stats struct {
	Entries      int
	Bytes        int64 // entry files on disk, headers included (what MaxBytes caps)
	Hits, Misses int64
	SavedSeconds float64 // sum of Entry.Seconds over all hits
}

// Stats counts the entries on disk and reads the counters under their lock.
// A cache that was never created has zero stats.
func (s *Store) Stats() (Stats, error) {
	if s.Dir == "" {
		return Stats{}, fmt.Errorf("stats: %w", errNoDir)
	}
	items, err := s.list()
	if errors.Is(err, fs.ErrNotExist) {
		return Stats{}, nil
	}
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	var st Stats
	for _, it := range items {
		st.Entries++
		st.Bytes += it.size
	}
	c, err := s.readCounters()
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	st.Hits, st.Misses, st.SavedSeconds = c.hits, c.misses, c.saved
	return st, nil
}

// readCounters reads the counters under a shared lock, opening the file
// read-only and creating nothing, so figures can be read from a cache that
// is read-only or another user's. No counters file means zero counters, and
// so does something else planted in its place (a FIFO, a folder, a link):
// it holds no counters, and is neither followed nor waited on.
func (s *Store) readCounters() (counters, error) {
	path := filepath.Join(s.Dir, statsName)
	f, err := state.OpenRegular(path, true)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, state.ErrNotRegular),
		errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENXIO):
		return counters{}, nil
	case err != nil:
		return counters{}, err
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_SH); err != nil {
		return counters{}, &fs.PathError{Op: "lock", Path: path, Err: err}
	}
	var buf [statsSize + 1]byte
	n, err := state.PreadFull(fd, buf[:], 0)
	if err != nil {
		return counters{}, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return decodeCounters(buf[:n]), nil
}

// The counters file is 32 bytes: magic, hits, misses, saved seconds (float64
// bits), little-endian. Unreadable content counts as zero rather than
// blocking the cache.
const (
	statsName  = "stats"
	statsMagic = "GUARDPS1"
	statsSize  = 32
)

type counters struct {
	hits, misses int64
	saved        float64
}

func decodeCounters(b []byte) counters {
	if len(b) != statsSize || string(b[:8]) != statsMagic {
		return counters{}
	}
	c := counters{
		hits:   int64(binary.LittleEndian.Uint64(b[8:])),
		misses: int64(binary.LittleEndian.Uint64(b[16:])),
		saved:  math.Float64frombits(binary.LittleEndian.Uint64(b[24:])),
	}
	if c.hits < 0 || c.misses < 0 || cleanSeconds(c.saved) != c.saved {
		return counters{}
	}
	return c
}

func (c counters) encode() []byte {
	b := make([]byte, statsSize)
	copy(b, statsMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(c.hits))
	binary.LittleEndian.PutUint64(b[16:], uint64(c.misses))
	binary.LittleEndian.PutUint64(b[24:], math.Float64bits(c.saved))
	return b
}

// update applies fn to the counters while holding an exclusive flock on the
// counters file, so concurrent processes never lose an increment. The lock
// is per open file, so goroutines of one process exclude each other too.
// No fsync: a crash may lose the last increments, never the entries. The
// file is guard's own (state.OpenOwn): a link or FIFO planted in its
// place is replaced, never followed or waited on.
func (s *Store) update(fn func(*counters)) error {
	path := filepath.Join(s.Dir, statsName)
	f, err := state.OpenOwn(path, os.O_RDWR, filePerm)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := flockEx(fd); err != nil {
		return &fs.PathError{Op: "lock", Path: path, Err: err}
	}
	var buf [statsSize + 1]byte
	n, err := state.PreadFull(fd, buf[:], 0)
	if err != nil {
		return &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if n == 0 {
		// Just created: the mode asked for passed through the umask, so
		// state it explicitly.
		if err := syscall.Fchmod(fd, filePerm); err != nil {
			return &fs.PathError{Op: "chmod", Path: path, Err: err}
		}
	}
	c := decodeCounters(buf[:n])
	before := c
	fn(&c)
	if c == before && n == statsSize {
		return nil
	}
	if err := pwriteFull(fd, c.encode()); err != nil {
		return &fs.PathError{Op: "write", Path: path, Err: err}
	}
	if n > statsSize {
		if err := syscall.Ftruncate(fd, statsSize); err != nil {
			return &fs.PathError{Op: "truncate", Path: path, Err: err}
		}
	}
	return nil
}

// flockEx takes the exclusive lock on fd, waiting for another holder; the
// lock goes with the descriptor's close.
func flockEx(fd int) error {
	for {
		if err := syscall.Flock(fd, syscall.LOCK_EX); err != syscall.EINTR {
			return err
		}
	}
}
