package install

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/state"
)

// Background is a heal started with `guard heal --background`.
type Background struct {
	Self     string   // guard's executable: the detached heal runs it as `guard heal NAMES`
	Names    []string // what to heal; none heals everything
	Env      []string
	StateDir string
	// Every, when not zero, starts the heal at most once per Every (the
	// prewarm hook at shell start passes it); a manual --background heal
	// passes zero and always starts.
	Every time.Duration
}

// PrewarmEvery is how often the prewarm hook may start a background heal.
const PrewarmEvery = 10 * time.Minute

// Low priority for the background heal: nice 19, and the lowest
// best-effort IO class (idle would let any busy neighbour starve it, and
// the agent's own call may be waiting on its lock).
const (
	backgroundNice   = 19
	ioprioWhoProcess = 1
	ioprioClassBE    = 2
	ioprioClassShift = 13
	backgroundIOPrio = ioprioClassBE<<ioprioClassShift | 7
)

// LogPath is where a background heal's stderr (its progress and
// messages) goes; its heal events go to the heal log as any heal's do.
func (b Background) LogPath() string { return filepath.Join(b.StateDir, "heal-background.log") }

// stampPath is the prewarm stamp: its mtime is when a prewarm heal last
// started.
func (b Background) stampPath() string { return filepath.Join(b.StateDir, "prewarm.stamp") }

// Start detaches `guard heal NAMES` in a session of its own, at low CPU and
// IO priority, and returns at once with its pid; 0 and no error when Every
// says a heal started too recently. The child takes the same locks and
// logs the same events as any `guard heal`, so a call that needs what it
// heals waits on its lock with progress, as it would for any heal.
func (b Background) Start() (int, error) {
	if err := os.MkdirAll(b.StateDir, 0o755); err != nil {
		return 0, fmt.Errorf("create state folder: %w", err)
	}
	if b.Every > 0 {
		due, err := b.due()
		if err != nil || !due {
			return 0, err
		}
	}
	logf, err := state.OpenOwn(b.LogPath(), os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", b.LogPath(), err)
	}
	defer logf.Close()
	cmd := &exec.Cmd{
		Path:        b.Self,
		Args:        append([]string{"guard", "heal"}, b.Names...),
		Env:         b.Env,
		Stdout:      nil, // /dev/null: the summary table has no reader
		Stderr:      logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	// Nice and IO priority belong to a thread on Linux, and a forked child
	// inherits them from the thread that forked it: lower this thread's,
	// then fork from it. This process ends right after, so nothing else
	// runs at the lower priority.
	runtime.LockOSThread()
	if err := lowerPriority(); err != nil {
		// A sandbox may forbid it (seccomp); the heal is still worth
		// running, and its log says why it runs at normal priority.
		fmt.Fprintf(logf, "guard: %v; healing at normal priority\n", err)
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start the background heal: %w", err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return pid, nil
}

// lowerPriority sets the calling thread's nice value and IO priority.
func lowerPriority() error {
	if err := unix.Setpriority(unix.PRIO_PROCESS, 0, backgroundNice); err != nil {
		return fmt.Errorf("lower the CPU priority: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, backgroundIOPrio); e != 0 {
		return fmt.Errorf("lower the IO priority: %w", e)
	}
	return nil
}

// due takes the prewarm stamp: true when no prewarm heal started within
// Every, and then the stamp says one starts now. Two shells starting at
// once race for the stamp's lock; the loser starts nothing.
func (b Background) due() (bool, error) {
	f, err := state.OpenOwn(b.stampPath(), os.O_RDWR, 0o600)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", b.stampPath(), err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, fmt.Errorf("lock %s: %w", b.stampPath(), err)
	}
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	now := time.Now()
	if fi.Size() > 0 && now.Sub(fi.ModTime()) < b.Every && fi.ModTime().Before(now.Add(time.Minute)) {
		return false, nil
	}
	// The size tells a stamp that was written from one just created; the
	// write itself sets the mtime the next start compares.
	if _, err := f.WriteAt([]byte("prewarm\n"), 0); err != nil {
		return false, fmt.Errorf("write %s: %w", b.stampPath(), err)
	}
	return true, nil
}
