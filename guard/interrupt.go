package guard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// InterruptedError says a heal was cut short by a signal to guard.
type InterruptedError struct{ Signal syscall.Signal }

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted by %s while healing; partial work is kept for the next call", unix.SignalName(e.Signal))
}

// Status is the shell's status for death by this signal.
func (e *InterruptedError) Status() int { return 128 + int(e.Signal) }

// underSignals runs a heal with SIGINT, SIGTERM and SIGHUP turned into a
// cancelled context. Without it a harness's SIGTERM would kill guard alone
// and leave its build running, orphaned; with it the builder kills the
// build's process group and a download keeps its partial file for the next
// call to resume.
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
		return &InterruptedError{Signal: got}
	}
	return err
}

// interrupted returns the InterruptedError inside err, if any.
func interrupted(err error) (*InterruptedError, bool) {
	var ie *InterruptedError
	ok := errors.As(err, &ie)
	return ie, ok
}
