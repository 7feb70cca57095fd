package heallog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
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
	sc, err := ReadBounded(path, n, since, install, 0)
	return sc.Records, sc.Others, err
}

// Scan is what ReadBounded read.
type Scan struct {
	Records []Record // oldest first
	Others  int      // events of other installs, or unmarked, read past
	// Read is how many bytes of the log (and its .1) were read.
	Read int64
	// OlderNotRead says the bound was met with older lines left unread.
	OlderNotRead bool
}

// ReadBounded is ReadFor reading at most maxBytes of the log and its .1
// together (0 = no bound): what `guard status` shows must cost the same
// on a log of many installs (a shared /tmp/selfheal.log, written by many
// for weeks) as on one of this install's alone, whatever share of it is
// this install's. Where the bound cuts, OlderNotRead says so.
func ReadBounded(path string, n int, since time.Time, install string, maxBytes int64) (Scan, error) {
	var newestFirst []Record
	if maxBytes <= 0 {
		maxBytes = math.MaxInt64
	}
	r := reader{n: n, since: since, install: install, out: &newestFirst, budget: maxBytes}
	for _, p := range []string{path, path + ".1"} {
		done, err := r.readFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Scan{}, err
		}
		if done || r.cut {
			break
		}
	}
	slices.Reverse(newestFirst)
	return Scan{Records: newestFirst, Others: r.others, Read: r.read, OlderNotRead: r.cut}, nil
}

// reader is one ReadFor: what it keeps, and what it counted out.
type reader struct {
	n       int
	since   time.Time
	install string
	out     *[]Record
	others  int
	budget  int64 // bytes it may read in all
	read    int64 // bytes read
	cut     bool  // the budget ran out before the oldest line
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
	left := r.budget - r.read
	defer func() { r.read = r.budget - left }()
	needle := installNeedle(r.install)
	cut, err := linesBackward(f, fi.Size(), &left, func(line []byte) bool {
		if needle != nil && !bytes.Contains(line, needle) {
			// Not this install's (its mark is nowhere in the line): an
			// event of another install is counted, not decoded, unless
			// since needs its time and guard's own shape does not give it.
			if ts, ok := otherEvent(line, since); ok {
				if !since.IsZero() && ts.Before(since) {
					done = true
				} else {
					r.others++
				}
				return true
			}
		}
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
	r.cut = r.cut || (cut && !done)
	return done, err
}

// linesBackward calls line for each line of r (size bytes), last line
// first, without its newline. It stops when line returns false, or when
// more returns false at the start of a block. Lines longer than maxLine are
// skipped. It reads no more than *left bytes (taking what it reads off),
// and reports cut when that stopped it before the file's first byte; the
// line the bound cuts through is not read.
func linesBackward(r io.ReaderAt, size int64, left *int64, line func([]byte) bool, more func() bool) (cut bool, err error) {
	var buf []byte
	var head []byte // the start of the block read last: a line whose beginning lies further back
	overlong := false
	for pos, block := size, int64(firstBlock); pos > 0; block = min(2*block, maxBlock) {
		if !more() {
			return false, nil
		}
		if *left <= 0 {
			return true, nil
		}
		k := min(block, pos, *left)
		*left -= k
		pos -= k
		// One buffer for the block and the line it ends in (head, kept
		// apart): the read of a long log allocates it once, not per block.
		if int64(cap(buf)) < k+int64(len(head)) {
			buf = make([]byte, k+int64(len(head)), k+int64(len(head))+firstBlock)
		}
		if _, err := r.ReadAt(buf[:k], pos); err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read heal log: %w", err)
		}
		data := append(buf[:k], head...)
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
				return false, nil
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
	return false, nil
}

// installNeedle is install as it stands, quoted, in a line that carries
// it: nil when JSON would escape any of its bytes (then every line is
// decoded).
func installNeedle(install string) []byte {
	if install == "" {
		return nil
	}
	for i := 0; i < len(install); i++ {
		if c := install[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return nil
		}
	}
	return []byte(`"` + install + `"`)
}

// otherEvent reads, without decoding it, a line guard wrote of another
// install: an object naming an event ({"level":…,"ts":"RFC 3339",
// "event":…}). Its time is read only when since asks for it; ok is false
// for any other line, which is then decoded.
func otherEvent(line []byte, since time.Time) (ts time.Time, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || line[len(line)-1] != '}' || !bytes.Contains(line, []byte(`"event":"`)) {
		return ts, false
	}
	if since.IsZero() {
		return ts, true
	}
	_, rest, found := bytes.Cut(line, []byte(`"ts":"`))
	end := bytes.IndexByte(rest, '"')
	if !found || end < 0 {
		return ts, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(rest[:end]))
	return ts, err == nil
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
