// Package heallog writes guard's heal events as JSON lines (zap) and reads
// them back for `guard status`.
//
// The log file is opened lazily, on the first event, so that a healthy shim
// call never pays for zap or the open. It is opened without following
// symlinks, created 0600, refused when it belongs to another user, and
// rotated to FILE.1 once it passes a size cap. A log that cannot be opened
// never stops the call: guard warns once on stderr and goes on.
package heallog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sandbox-guard/guard/guard/state"
)

// DefaultMaxBytes is the size past which the log is rotated to FILE.1.
const DefaultMaxBytes = 5 << 20

// Event is one heal event. Empty fields are left out of the JSON line.
type Event struct {
	Level      string // "info" (default), "warn" or "error"
	Event      Name   // one of Events(), listed in docs/exit-status-and-events.md ("Heal log events")
	Tool       string
	Target     string
	Reason     string
	Result     string
	DurationMS int64
	Bytes      int64
	Attempt    int
	// Connections is how many connections fetched a download at once
	// (model.download); 0 = not a download.
	Connections int
}

// Log is a lazily opened heal log. The zero value is not usable; use New.
type Log struct {
	Path     string
	MaxBytes int64
	Warn     io.Writer // where a refusal to open is reported (stderr)
	// Fallback, when set, takes the events when Path cannot be opened: the
	// shared default in /tmp that another user created first. The person
	// is told where the events go once, when Fallback is created.
	Fallback string
	// Install marks every event with the install that wrote it (its state
	// folder): the default log is shared by every HOME and user on the
	// machine, and guard status shows its own install's events only
	// (docs/exit-status-and-events.md, "One log, many installs").
	Install string
	// Detached marks every event as written by a detached heal (`guard
	// heal --job`), which a call started and left running.
	Detached bool

	once   sync.Once
	mu     sync.Mutex
	file   *os.File
	logger *zap.Logger
}

// New returns a Log for path that opens nothing until the first event.
func New(path string, warn io.Writer) *Log {
	return &Log{Path: path, MaxBytes: DefaultMaxBytes, Warn: warn}
}

// Write records one event. Errors are reported once on Warn, never returned:
// the heal log must not decide whether a tool runs.
func (l *Log) Write(e Event) {
	if l == nil {
		return
	}
	l.once.Do(l.open)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logger == nil {
		return
	}
	fields := make([]zap.Field, 0, 8)
	add := func(k, v string) {
		if v != "" {
			fields = append(fields, zap.String(k, v))
		}
	}
	add("tool", e.Tool)
	add("target", e.Target)
	add("reason", e.Reason)
	add("result", e.Result)
	if e.DurationMS != 0 {
		fields = append(fields, zap.Int64("duration_ms", e.DurationMS))
	}
	if e.Bytes != 0 {
		fields = append(fields, zap.Int64("bytes", e.Bytes))
	}
	if e.Attempt != 0 {
		fields = append(fields, zap.Int("attempt", e.Attempt))
	}
	if e.Connections != 0 {
		fields = append(fields, zap.Int("connections", e.Connections))
	}
	// Last, so that a line reads as before up to them.
	if l.Detached {
		fields = append(fields, zap.Bool("detached", true))
	}
	add("install", l.Install)
	switch e.Level {
	case "warn":
		l.logger.Warn(string(e.Event), fields...)
	case "error":
		l.logger.Error(string(e.Event), fields...)
	default:
		l.logger.Info(string(e.Event), fields...)
	}
}

// Close flushes and closes the file, if it was ever opened.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	_ = l.logger.Sync()
	err := l.file.Close()
	l.file, l.logger = nil, nil
	return err
}

func (l *Log) open() {
	f, err := OpenFile(l.Path, l.MaxBytes)
	if err != nil && l.Fallback != "" {
		f, err = l.openFallback(err)
	}
	if err != nil {
		if l.Warn != nil {
			fmt.Fprintf(l.Warn, "guard: %v; heal events are not logged (set GUARD_LOG to a file of your own)\n", err)
		}
		return
	}
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		MessageKey:     "event",
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeLevel:    zapcore.LowercaseLevelEncoder,
		EncodeDuration: zapcore.MillisDurationEncoder,
		LineEnding:     "\n",
	})
	l.file = f
	l.logger = zap.New(zapcore.NewCore(enc, zapcore.AddSync(f), zapcore.DebugLevel))
}

// openFallback opens the per-user log after Path failed with why, and says
// so when it creates the file: the first time, not on every call.
func (l *Log) openFallback(why error) (*os.File, error) {
	_, statErr := os.Lstat(l.Fallback)
	if err := os.MkdirAll(filepath.Dir(l.Fallback), 0o700); err != nil {
		return nil, why
	}
	f, err := OpenFile(l.Fallback, l.MaxBytes)
	if err != nil {
		return nil, why
	}
	if errors.Is(statErr, fs.ErrNotExist) && l.Warn != nil {
		fmt.Fprintf(l.Warn, "guard: %v; heal events go to %s instead\n", why, l.Fallback)
	}
	return f, nil
}

// Where is the file heal events for path go to, given its fallback (""
// for none): path, unless it is there and cannot be guard's log (another
// user's file, a link, not a regular file) and a fallback is set. It is
// what guard status reads; it costs an lstat, so a call does not ask it.
func Where(path, fallback string) string {
	if fallback == "" {
		return path
	}
	fi, err := os.Lstat(path)
	if err != nil || (fi.Mode().IsRegular() && state.Owned(fi)) {
		return path
	}
	return fallback
}

// OpenFile opens path for appending the way state.OpenLog opens every log
// (no symlink at the last element, nothing but a regular file of guard's
// own user, created 0600, rotated to path+".1" past maxBytes), with the
// heal log's own wording for what it refuses.
func OpenFile(path string, maxBytes int64) (*os.File, error) {
	f, err := state.OpenLog(path, maxBytes)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("heal log %s is a symlink; refusing to follow it", path)
		}
		if errors.Is(err, state.ErrNotRegular) || errors.Is(err, syscall.ENXIO) {
			// ENXIO: a FIFO nobody reads, opened without blocking.
			return nil, fmt.Errorf("heal log %s is not a regular file", path)
		}
		if errors.Is(err, state.ErrNotOwned) {
			return nil, fmt.Errorf("heal log %s belongs to another user", path)
		}
		return nil, fmt.Errorf("open heal log: %w", err)
	}
	return f, nil
}

// Record is one event read back from the log.
type Record struct {
	TS          time.Time `json:"ts"`
	Level       string    `json:"level"`
	Event       string    `json:"event"`
	Tool        string    `json:"tool,omitempty"`
	Target      string    `json:"target,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Result      string    `json:"result,omitempty"`
	DurationMS  int64     `json:"duration_ms,omitempty"`
	Bytes       int64     `json:"bytes,omitempty"`
	Attempt     int       `json:"attempt,omitempty"`
	Connections int       `json:"connections,omitempty"`
	Install     string    `json:"install,omitempty"`  // the state folder of the install that wrote it; "" before guard marked events
	Detached    bool      `json:"detached,omitempty"` // written by a detached heal a call started
}
