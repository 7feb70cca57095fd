// Package lock serialises heals across processes with advisory file locks
// (flock(2)). A lock is only ever taken on the slow path, after a fast check
// found something to heal.
//
// The lock belongs to the open lock file, not to the process: a child given
// that file (File, exec.Cmd.ExtraFiles) holds the lock with us, so a build
// step orphaned by a killed guard keeps it until the step exits. gofrs/flock
// does not expose its file, hence the few lines of flock(2) here.
package lock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// pollEvery is how often a waiting Acquire tries the lock again.
const pollEvery = 100 * time.Millisecond

// Held is a lock this process owns. The kernel drops it when every process
// holding its file has exited, so a SIGKILL never leaves a lock held.
type Held struct {
	f      *os.File
	Waited time.Duration // how long Acquire waited for another holder
}

// Release unlocks, for every process holding the file too (an escaped
// daemon that kept it cannot keep the lock once guard is done), and closes
// the file. It is safe on a nil Held.
func (h *Held) Release() {
	if h == nil || h.f == nil {
		return
	}
	_ = syscall.Flock(int(h.f.Fd()), syscall.LOCK_UN)
	_ = h.f.Close()
	h.f = nil
}

// File is the open lock file. Hand it to a child (exec.Cmd.ExtraFiles) to
// have the lock outlive this process for as long as the child runs. Nil
// after Release.
func (h *Held) File() *os.File {
	if h == nil {
		return nil
	}
	return h.f
}

// Acquire takes the exclusive lock at path, creating its folder and the
// lock file (state.OpenOwn). When another process holds it, onWait is
// called once (to log lock.wait and tell the person) and Acquire polls
// until ctx ends.
func Acquire(ctx context.Context, path string, onWait func()) (*Held, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// A FIFO or link planted in guard's own folder would hold the open or
	// have guard create and lock another file: OpenOwn replaces it.
	f, err := state.OpenOwn(path, os.O_RDONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	ok, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if ok {
		return &Held{f: f}, nil
	}
	if onWait != nil {
		onWait()
	}
	start := time.Now()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: waited %s: %w", path, time.Since(start).Round(time.Second), ctx.Err())
		case <-tick.C:
		}
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if ok {
			return &Held{f: f, Waited: time.Since(start)}, nil
		}
	}
}

// Try takes the exclusive lock at path only if it is free now: ok false
// (and no error) when another process holds it.
func Try(path string) (h *Held, ok bool, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := state.OpenOwn(path, os.O_RDONLY, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	if ok, err = tryLock(f); !ok || err != nil {
		f.Close()
		if err != nil {
			err = fmt.Errorf("lock %s: %w", path, err)
		}
		return nil, false, err
	}
	return &Held{f: f}, true, nil
}

// tryLock takes the lock without blocking; false means another holder.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, err
	}
}
