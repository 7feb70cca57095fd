package healjob

import (
	"bytes"
	"context"
	"io"
	"os"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// pollEvery is how often a waiting call reads the job's lock, record and
// log.
const pollEvery = 200 * time.Millisecond

// maxLine bounds a line of the log held back until its end arrives.
const maxLine = 4096

// Follow waits until the heal of job key ends or ctx is done. It copies
// the heal's log (its stderr: "guard: rebuilding …", "guard: rebuilt …")
// to w line by line as it grows, and hands check each status it reads; a
// non-nil error from check (the heal cannot finish in time) stops the
// wait with that error. A heal whose record is stale (not updated for
// longer than its own limit: stopped or stuck) ends the wait with
// ErrStuck. It returns the last status read: Alive false when the heal
// ended (Done tells how, or it was killed), with ctx's error when ctx
// ended first.
func Follow(ctx context.Context, stateDir, key string, w io.Writer, check func(Status) error) (Status, error) {
	log := &logTail{path: LogPath(stateDir, key), w: w}
	defer log.close()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last Status
	for {
		s, ok := Look(stateDir, key)
		if !ok && alive(stateDir, key) {
			// The record cannot be read (garbage, or a link or FIFO
			// planted in its place) but the heal holds its lock: it runs
			// on, as far as last seen, and replaces the record whole at
			// its next update.
			s, ok = last, true
			s.Alive = true
		}
		log.copy(!ok || !s.Alive)
		if !ok || !s.Alive {
			return s, nil
		}
		last = s
		if err := check(s); err != nil {
			return s, err
		}
		if s.Stale(time.Now()) {
			log.copy(true)
			return s, ErrStuck
		}
		select {
		case <-ctx.Done():
			log.copy(false)
			return s, ctx.Err()
		case <-tick.C:
		}
	}
}

// logTail copies what is added to a log, whole lines only until the end.
type logTail struct {
	path string
	w    io.Writer
	f    *os.File
	held []byte
}

func (t *logTail) copy(end bool) {
	if t.f == nil {
		f, err := state.OpenRegular(t.path, true)
		if err != nil {
			return
		}
		t.f = f
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := t.f.Read(buf)
		t.held = append(t.held, buf[:n]...)
		if n == 0 || err != nil {
			break
		}
	}
	if i := bytes.LastIndexByte(t.held, '\n'); i >= 0 {
		_, _ = t.w.Write(t.held[:i+1])
		t.held = append(t.held[:0], t.held[i+1:]...)
	}
	if end && len(t.held) > 0 || len(t.held) > maxLine {
		_, _ = t.w.Write(append(t.held, '\n'))
		t.held = t.held[:0]
	}
}

func (t *logTail) close() {
	if t.f != nil {
		t.f.Close()
	}
}
