// Package promptcache is the prompt cache of the llama shims: a repeated
// prompt is answered by replaying the stdout of an earlier identical run,
// byte for byte, without starting the tool.
//
// It is storage only. The caller computes the Key, decides when to look up and
// when to store, logs the events and writes replayed bytes to its stdout.
//
// Layout of Dir (0700): one file per entry named by its key (64 hex digits,
// 0600, format in format.go), "stats" holding the hit/miss counters (updated
// under a flock(2) lock on that same file, so counts stay exact across
// processes), and ".tmp-*" files (state.TempPrefix) while a Put is in
// flight. A Put writes a temp file, fsyncs it and renames it into place
// (state.Replace, which replaces a symlink planted under the key rather than
// writing through it), so readers only ever see whole entries; anything
// that does not check out on read is treated as a miss and removed.
// Least-recently-used order is the entry file's mtime, which a hit
// refreshes; that keeps the hit path to one small file read, one utimensat
// and the counter update.
package promptcache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// FormatVersion is written into every entry and mixed into every key; bump it
// when either changes so old entries simply stop matching.
const FormatVersion = 1

// DefaultMaxBytes caps the cache when Store.MaxBytes is not set.
const DefaultMaxBytes int64 = 256 << 20

var (
	// ErrInvalidKey is returned for a key that Key could not have produced.
	ErrInvalidKey = errors.New("invalid cache key")
	// ErrTooLarge is returned by Put when one entry alone exceeds MaxBytes;
	// nothing is stored.
	ErrTooLarge = errors.New("entry larger than the cache cap")
)

// Store is a prompt cache in one directory. The zero value of every field but
// Dir is usable, and a Store may be shared by goroutines and processes.
type Store struct {
	Dir      string           // e.g. $GUARD_STATE_DIR/prompts; created 0700, entries 0600
	MaxBytes int64            // cap over all entry files; DefaultMaxBytes when <= 0
	TTL      time.Duration    // 0 = entries never expire
	Now      func() time.Time // nil = time.Now (for tests)
}

// Entry is one cached run.
type Entry struct {
	Stdout  []byte    // exactly what the tool printed; may be invalid UTF-8
	Seconds float64   // how long the real run took, summed into Stats.SavedSeconds on hits
	Created time.Time // when the run was stored; Put fills it in when zero
}

const (
	dirPerm  = 0o700
	filePerm = 0o600
)

// Get looks key up. A corrupt, truncated or expired entry is a miss and is
// removed. A hit refreshes the entry's LRU time and counts a hit plus its
// saved seconds; a miss counts a miss. Errors mean the directory itself is
// unusable, except on a hit: ok is then still true and the entry valid, and
// the error only says the counters could not be updated.
func (s *Store) Get(key string) (e Entry, ok bool, err error) {
	if err := s.check(key); err != nil {
		return Entry{}, false, fmt.Errorf("get: %w", err)
	}
	path := filepath.Join(s.Dir, key)
	e, id, err := s.read(path)
	switch {
	case err == nil:
		now := s.now()
		if s.expired(e, now) {
			removeIfSame(path, id)
			break
		}
		// A failed touch (entry replaced or removed meanwhile) only costs LRU
		// accuracy; the bytes we read are still a valid answer.
		_ = os.Chtimes(path, now, now)
		if err := s.update(func(c *counters) { c.hits++; c.saved += e.Seconds }); err != nil {
			return e, true, fmt.Errorf("count hit: %w", err)
		}
		return e, true, nil
	case errors.Is(err, fs.ErrNotExist):
	default:
		removeIfSame(path, id)
	}
	if err := s.ensureDir(); err != nil {
		return Entry{}, false, fmt.Errorf("get: %w", err)
	}
	if err := s.update(func(c *counters) { c.misses++ }); err != nil {
		return Entry{}, false, fmt.Errorf("count miss: %w", err)
	}
	return Entry{}, false, nil
}

// read refuses anything larger than a valid entry could be before reading
// it. id names the file that was opened, when there was one, so a corrupt
// entry is removed only if it is still the same file.
func (s *Store) read(path string) (Entry, *fileID, error) {
	b, id, err := readEntryFile(path, headerSize+s.maxBytes())
	if err != nil {
		return Entry{}, id, err
	}
	e, err := decodeEntry(b)
	return e, id, err
}

// removeIfSame removes path unless a concurrent Put has already renamed a
// fresh entry over the bad one we read.
func removeIfSame(path string, read *fileID) {
	if read != nil {
		fi, err := os.Lstat(path)
		if err != nil {
			return
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || uint64(st.Dev) != read.dev || st.Ino != read.ino {
			return
		}
	}
	_ = os.Remove(path)
}

// Put stores e under key. Empty stdout is never stored (an empty run is a
// failure, not an answer). The entry is written to a temp file, fsynced and
// renamed into place, then least-recently-used entries are evicted until the
// cache fits MaxBytes.
func (s *Store) Put(key string, e Entry) error {
	if len(e.Stdout) == 0 {
		return nil
	}
	if err := s.check(key); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if int64(len(e.Stdout)) > s.maxBytes()-headerSize {
		return fmt.Errorf("put %d bytes: %w", len(e.Stdout), ErrTooLarge)
	}
	if e.Created.IsZero() {
		e.Created = s.now()
	}
	e.Seconds = cleanSeconds(e.Seconds)
	if err := s.ensureDir(); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	path := filepath.Join(s.Dir, key)
	if err := state.Replace(path, encodeEntry(e), filePerm); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	// The Store's clock, not the file system's, orders LRU, so a fake Now
	// gives tests a deterministic order.
	now := s.now()
	_ = os.Chtimes(path, now, now)
	if err := s.evict(key); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return nil
}

// Clear removes every entry (and any abandoned temp file) and resets the
// counters. A cache that was never created is already clear.
func (s *Store) Clear() error {
	if s.Dir == "" {
		return fmt.Errorf("clear: %w", errNoDir)
	}
	des, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clear: %w", err)
	}
	for _, de := range des {
		name := de.Name()
		if !validKey(name) && !isTemp(name) {
			continue
		}
		if err := os.Remove(filepath.Join(s.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("clear: %w", err)
		}
	}
	if err := s.update(func(c *counters) { *c = counters{} }); err != nil {
		return fmt.Errorf("clear: %w", err)
	}
	return nil
}

var errNoDir = errors.New("cache dir not set")

func (s *Store) check(key string) error {
	if s.Dir == "" {
		return errNoDir
	}
	if !validKey(key) {
		return ErrInvalidKey
	}
	return nil
}

// ensureDir creates Dir 0700 and tightens an existing one; it stays off the
// hit path, where the entry's existence already proves the directory.
func (s *Store) ensureDir() error {
	fi, err := os.Stat(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(s.Dir, dirPerm); err != nil {
			return fmt.Errorf("create cache dir: %w", err)
		}
		fi, err = os.Stat(s.Dir)
	}
	if err != nil {
		return fmt.Errorf("stat cache dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("cache dir %s: %w", s.Dir, syscall.ENOTDIR)
	}
	if fi.Mode().Perm() != dirPerm {
		if err := os.Chmod(s.Dir, dirPerm); err != nil {
			return fmt.Errorf("chmod cache dir: %w", err)
		}
	}
	return nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) maxBytes() int64 {
	if s.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return s.MaxBytes
}

// expired judges by the creation time in the entry, not by mtime, which a
// hit refreshes.
func (s *Store) expired(e Entry, now time.Time) bool {
	return s.TTL > 0 && now.Sub(e.Created) > s.TTL
}
