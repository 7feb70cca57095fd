package guard

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// underSignals runs a heal with SIGINT, SIGTERM and SIGHUP turned into a
// cancelled context and an *interruptedError. Without it a harness's
// SIGTERM would kill guard alone and leave its build running, orphaned;
// with it the builder kills the build's process group and a download keeps
// its partial file for the next call to resume.
func underSignals(ctx context.Context, heal func(context.Context) error) error {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu  sync.Mutex
		got syscall.Signal
	)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			mu.Lock()
			got = s.(syscall.Signal)
			mu.Unlock()
			cancel()
		case <-done:
		}
	}()
	err := heal(ctx)
	close(done)
	mu.Lock()
	defer mu.Unlock()
	if got != 0 {
		return &interruptedError{signal: got}
	}
	return err
}
