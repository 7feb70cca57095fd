package lock_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

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
