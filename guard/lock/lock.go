// Package lock serialises heals across processes with advisory file locks
// (gofrs/flock). A lock is only ever taken on the slow path, after a fast
// check found something to heal.
package lock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// Held is a lock this process owns. The kernel drops it if the process dies,
// so a SIGKILL never leaves a lock held.
type Held struct {
	f      *flock.Flock
	Waited time.Duration // how long Acquire waited for another holder
}

// Release unlocks. It is safe on a nil Held.
func (h *Held) Release() {
	if h != nil {
		_ = h.f.Unlock()
	}
}

// Acquire takes the exclusive lock at path, creating its folder. When another
// process holds it, onWait is called once (to log lock.wait and tell the
// person) and Acquire polls until ctx ends.
func Acquire(ctx context.Context, path string, onWait func()) (*Held, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f := flock.New(path)
	ok, err := f.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if ok {
		return &Held{f: f}, nil
	}
	if onWait != nil {
		onWait()
	}
	start := time.Now()
	ok, err = f.TryLockContext(ctx, 100*time.Millisecond)
	if err != nil || !ok {
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("lock %s: waited %s: %w", path, time.Since(start).Round(time.Second), err)
	}
	return &Held{f: f, Waited: time.Since(start)}, nil
}
