package lock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/lock"
)

func TestAcquireWaitsForHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks", "m.lock")
	first, err := lock.Acquire(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var waited atomic.Bool
	got := make(chan *lock.Held)
	go func() {
		h, err := lock.Acquire(context.Background(), path, func() { waited.Store(true) })
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	time.Sleep(150 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("second Acquire did not wait")
	default:
	}
	first.Release()
	second := <-got
	if !waited.Load() {
		t.Fatal("onWait not called")
	}
	second.Release()
}

func TestAcquireTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.lock")
	first, _ := lock.Acquire(context.Background(), path, nil)
	defer first.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := lock.Acquire(ctx, path, nil); err == nil {
		t.Fatal("Acquire succeeded while the lock was held")
	}
}

// A child given the lock file holds the lock after its parent's copy is
// gone, as a build step does when guard is killed.
func TestChildKeepsLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "b.lock")
	h, err := lock.Acquire(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("sleep", "0.5")
	child.ExtraFiles = []*os.File{h.File()}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { child.Wait(); close(exited) }()
	h.File().Close() // what the kernel does when guard dies without Release
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if other, err := lock.Acquire(ctx, path, nil); err == nil {
		other.Release()
		select {
		case <-exited:
			t.Skip("the machine is too slow: the child ended before the check")
		default:
		}
		t.Fatal("the lock was free while the child holding its file ran")
	}
	<-exited
	other, err := lock.Acquire(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	other.Release()
	h.Release() // already closed: must not panic
}

// What was planted where the lock file goes, in guard's own folder (a FIFO
// that would hold the open, a link that would have guard create or lock
// another file), is replaced by a lock file of guard's own: never waited
// on, never followed.
func TestAcquireReplacesWhatWasPlanted(t *testing.T) {
	dir := t.TempDir()
	fifo, link := filepath.Join(dir, "locks", "f.lock"), filepath.Join(dir, "locks", "l.lock")
	os.MkdirAll(filepath.Dir(fifo), 0o700)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "created-by-guard")
	os.Symlink(target, link)
	for _, path := range []string{fifo, link} {
		guardtest.Within(t, "Acquire of "+path, func() {
			h, err := lock.Acquire(context.Background(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			h.Release()
		})
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not a lock file: %v %v", path, fi, err)
		}
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("the link was followed: its target was created")
	}
	// A folder there is not guard's to remove: an error, not a wait.
	dirLock := filepath.Join(dir, "locks", "d.lock")
	os.Mkdir(dirLock, 0o700)
	if _, err := lock.Acquire(context.Background(), dirLock, nil); err == nil {
		t.Error("a folder was taken for a lock file")
	}
}
