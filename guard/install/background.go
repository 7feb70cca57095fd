package install

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/healjob"
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

// LogPath is where a background heal's stderr (its progress and
// messages) goes; its heal events go to the heal log as any heal's do.
func (b Background) LogPath() string { return filepath.Join(b.StateDir, "heal-background.log") }

// stampPath is the prewarm stamp: its mtime is when a prewarm heal last
// started.
func (b Background) stampPath() string { return filepath.Join(b.StateDir, "prewarm.stamp") }

// Start detaches `guard heal NAMES` (healjob.Spawn: a session of its
// own, low CPU and IO priority) and returns at once with its pid; 0 and no
// error when Every says a heal started too recently. The child takes the same locks and
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
	return healjob.Spawn(b.Self, append([]string{"guard", "heal"}, b.Names...), b.Env, logf)
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
