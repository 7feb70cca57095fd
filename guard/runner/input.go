package runner

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// feeder owns the writing end of the child's stdin (a pipe, or the pty
// master). Copied input and prompt answers both go through its queue, so
// they never interleave, and an answer never blocks the supervisor: when the
// child does not read and the queue is full, the answer is refused.
type feeder struct {
	f          *os.File
	closeOnEnd bool // a pipe is closed at the end of input; a pty gets ^D instead
	queue      chan []byte
	stop       chan struct{}
	done       chan struct{}
	mu         sync.Mutex
	ended      bool // end of input queued, or a write failed
	stopOnce   sync.Once
}

// eofChar is VEOF in a terminal's default settings: how a keyboard says
// "end of input" to a program reading a terminal in canonical mode.
const eofChar = 0x04

func newFeeder(f *os.File, closeOnEnd bool) *feeder {
	fe := &feeder{
		f:          f,
		closeOnEnd: closeOnEnd,
		queue:      make(chan []byte, 8),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	go fe.run()
	return fe
}

func (fe *feeder) run() {
	defer close(fe.done)
	for {
		select {
		case <-fe.stop:
			return
		case msg := <-fe.queue:
			if msg == nil { // end of input
				if fe.closeOnEnd {
					_ = fe.f.Close()
					return
				}
				msg = []byte{eofChar}
			}
			if _, err := fe.f.Write(msg); err != nil {
				fe.markEnded()
				return
			}
		}
	}
}

func (fe *feeder) markEnded() {
	fe.mu.Lock()
	fe.ended = true
	fe.mu.Unlock()
}

// offer queues p without blocking and reports whether it was queued.
func (fe *feeder) offer(p []byte) bool {
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if fe.ended {
		return false
	}
	select {
	case fe.queue <- p:
		return true
	default:
		return false
	}
}

// push queues p, waiting for room until cancel is closed.
func (fe *feeder) push(p []byte, cancel <-chan struct{}) bool {
	select {
	case fe.queue <- p:
		return true
	case <-cancel:
		return false
	case <-fe.done:
		return false
	}
}

// end queues the end of input: later answers are refused.
func (fe *feeder) end(cancel <-chan struct{}) {
	if fe.push(nil, cancel) {
		fe.markEnded()
	}
}

// shutdown stops the feeder. closeFile also closes the file, which wakes a
// write blocked on a child that never reads; the pty master is closed by its
// owner after the output is drained instead.
func (fe *feeder) shutdown(closeFile bool) {
	fe.stopOnce.Do(func() { close(fe.stop) })
	fe.markEnded()
	if closeFile {
		_ = fe.f.Close()
	}
}

// copier copies guard's stdin into a feeder until end of input or until
// stopped. It waits in poll(2) on stdin and on a stop pipe rather than in a
// blocking read, so that stopping it works on any kind of stdin (a terminal
// is not pollable by the Go runtime) and never swallows input typed after
// the run.
type copier struct {
	// suspendAt, when set, finds the suspend key (Ctrl-Z) in what was
	// typed: -1 when it is not there. The key is not copied; suspended is
	// told instead.
	suspendAt  func([]byte) int
	suspended  chan struct{}
	src        *os.File // kept so the descriptor stays open while in use
	fd         int
	wakeR      int
	wakeW      int
	cancel     chan struct{}
	done       chan struct{}
	cancelOnce sync.Once
}

func startCopier(src *os.File, dst *feeder, suspendAt func([]byte) int) (*copier, error) {
	fd, ok := fdOf(src)
	if !ok {
		return nil, errors.New("copy stdin: no file descriptor")
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("copy stdin: %w", err)
	}
	c := &copier{
		suspendAt: suspendAt, suspended: make(chan struct{}, 1),
		src: src, fd: fd, wakeR: p[0], wakeW: p[1], cancel: make(chan struct{}), done: make(chan struct{}),
	}
	go c.run(dst)
	return c, nil
}

func (c *copier) run(dst *feeder) {
	defer close(c.done)
	defer unix.Close(c.wakeR)
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}, {Fd: int32(c.wakeR), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&unix.POLLNVAL != 0 {
			return
		}
		if fds[0].Revents == 0 {
			continue
		}
		buf := make([]byte, 4096)
		n, err := unix.Read(c.fd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if n <= 0 { // end of input, or an error that ends it (EIO: terminal gone)
			dst.end(c.cancel)
			return
		}
		typed := buf[:n]
		if c.suspendAt != nil {
			if i := c.suspendAt(typed); i >= 0 {
				if i > 0 && !dst.push(typed[:i], c.cancel) {
					return
				}
				select {
				case c.suspended <- struct{}{}:
				default:
				}
				typed = typed[i+1:]
			}
		}
		if len(typed) > 0 && !dst.push(typed, c.cancel) {
			return
		}
	}
}

// stop ends the copy and waits for it.
func (c *copier) stop() {
	c.cancelOnce.Do(func() {
		close(c.cancel)
		_ = unix.Close(c.wakeW) // the read end sees POLLHUP
	})
	<-c.done
}

// fdOf returns f's descriptor without File.Fd, which would switch a pollable
// file to blocking mode and break its deadlines for the caller.
func fdOf(f *os.File) (int, bool) {
	if f == nil {
		return -1, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, false
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, false
	}
	return fd, fd >= 0
}
