package heallog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// The log is read from its end, a block at a time, newest event first:
// `guard status` shows the last few events, and what it costs must follow
// what it shows, not how big the log has grown (a busy log and its rotated
// file hold megabytes of events, a log someone else's tool wrote into may
// hold anything). Memory is a block, one line and the events kept.
const (
	// firstBlock holds the last ten or so events; each further block is
	// twice the one before, up to maxBlock.
	firstBlock = 8 << 10
	maxBlock   = 256 << 10
	// maxLine bounds one line; a longer one is not an event (an event is a
	// few hundred bytes) and is skipped without being kept.
	maxLine = 1 << 20
)

// Read returns the last n events (oldest first) from path and its rotated
// file path+".1", keeping only those at or after since (zero = all; n <= 0 =
// all). It stops reading at the n-th event from the end, or at the end of
// the block where it met one older than since, so it reads little of a big
// log. Lines that are not events (a torn write, another program's text) are
// skipped. A missing log is not an error: nothing was healed yet. A log that
// is not a regular file (a FIFO, a device) is an error, found without
// waiting on it.
func Read(path string, n int, since time.Time) ([]Record, error) {
	recs, _, err := ReadFor(path, n, since, "")
	return recs, err
}

// ReadFor is Read keeping only the events of install (an Install mark;
// "" keeps every event): n counts those kept. others is how many events it
// met and left out, of other installs or unmarked (written before guard
// marked events, so no install can claim them), among those it read.
func ReadFor(path string, n int, since time.Time, install string) (recs []Record, others int, err error) {
	var newestFirst []Record
	r := reader{n: n, since: since, install: install, out: &newestFirst}
	for _, p := range []string{path, path + ".1"} {
		done, err := r.readFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, 0, err
		}
		if done {
			break
		}
	}
	slices.Reverse(newestFirst)
	return newestFirst, r.others, nil
}

// reader is one ReadFor: what it keeps, and what it counted out.
type reader struct {
	n       int
	since   time.Time
	install string
	out     *[]Record
	others  int
}

// readFile adds path's events to out, newest first, and reports whether
// the older file need not be read: out holds n events, or one older than
// since was met.
func (r *reader) readFile(path string) (bool, error) {
	n, since, out := r.n, r.since, r.out
	f, fi, err := state.OpenRegularStat(path, true) // a FIFO planted at the log's path must not hold guard status
	if err != nil {
		return false, err
	}
	defer f.Close()
	if !state.Owned(fi) {
		// Another user's file (a .1 planted in a sticky /tmp) holds no
		// event of guard's: read as if it were not there.
		return false, nil
	}
	done := false
	err = linesBackward(f, fi.Size(), func(line []byte) bool {
		rec, ok := parseLine(line)
		if !ok {
			return true
		}
		if !since.IsZero() && rec.TS.Before(since) {
			// Events are appended as they happen, so the rest is older
			// too; the block in hand is still read, since concurrent
			// writers may have put events a few milliseconds out of order.
			done = true
			return true
		}
		if r.install != "" && rec.Install != r.install {
			r.others++
			return true
		}
		*out = append(*out, rec)
		if n > 0 && len(*out) >= n {
			done = true
			return false
		}
		return true
	}, func() bool { return !done })
	return done, err
}

// linesBackward calls line for each line of r (size bytes), last line
// first, without its newline. It stops when line returns false, or when
// more returns false at the start of a block. Lines longer than maxLine are
// skipped.
func linesBackward(r io.ReaderAt, size int64, line func([]byte) bool, more func() bool) error {
	var buf []byte
	var head []byte // the start of the block read last: a line whose beginning lies further back
	overlong := false
	for pos, block := size, int64(firstBlock); pos > 0; block = min(2*block, maxBlock) {
		if !more() {
			return nil
		}
		k := min(block, pos)
		pos -= k
		if int64(cap(buf)) < k {
			buf = make([]byte, k)
		}
		if _, err := r.ReadAt(buf[:k], pos); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read heal log: %w", err)
		}
		data := append(buf[:k:k], head...)
		for {
			i := bytes.LastIndexByte(data, '\n')
			if i < 0 {
				break
			}
			tail := data[i+1:]
			data = data[:i]
			if overlong {
				overlong = false // tail is the start of the line that was too long
				continue
			}
			if !line(tail) {
				return nil
			}
		}
		head = append(head[:0], data...)
		if len(head) > maxLine {
			head, overlong = head[:0], true
		}
	}
	if !overlong && len(head) > 0 {
		line(head)
	}
	return nil
}

// parseLine reads one line of the log as an event; ok is false for
// anything that is not one.
func parseLine(line []byte) (rec Record, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return rec, false
	}
	if json.Unmarshal(line, &rec) != nil || rec.Event == "" {
		return rec, false
	}
	return rec, true
}
