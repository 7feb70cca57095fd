package heallog

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// Read returns the last n events (oldest first) from path and its rotated
// file path+".1", keeping only those at or after since (zero = all). Lines
// that are not events (a torn write, another program's text) are skipped.
// A missing log is not an error: it means nothing was healed yet.
func Read(path string, n int, since time.Time) ([]Record, error) {
	var all []Record
	for _, p := range []string{path + ".1", path} {
		recs, err := readFile(p, since)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return all, err
		}
		all = append(all, recs...)
	}
	if n > 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	return all, nil
}

func readFile(path string, since time.Time) ([]Record, error) {
	f, err := state.OpenRegular(path, true) // a FIFO planted at the log's path must not hold guard status
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, since)
}

// Parse reads JSON-line events from r; malformed lines are skipped.
func Parse(r io.Reader, since time.Time) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Event == "" {
			continue
		}
		if !since.IsZero() && rec.TS.Before(since) {
			continue
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return out, err
	}
	return out, nil
}
