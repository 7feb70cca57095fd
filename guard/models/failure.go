package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// failure is a remembered failed heal. Manifest is a fingerprint of the
// model's entry: a person who fixes the size, sha256 or urls gets a fresh
// try at once, without waiting out the back-off.
type failure struct {
	Path     string    `json:"path"`
	At       time.Time `json:"at"`
	Until    time.Time `json:"until"`
	Reason   string    `json:"reason"`
	Manifest string    `json:"manifest"`
}

func (h *Healer) failurePath(path string) string {
	return filepath.Join(h.layout().Failures(), state.PathKey(path)+".json")
}

func fingerprint(m *manifest.Model) string {
	s := sha256.Sum256([]byte(strings.Join(append([]string{m.File, m.SHA256, itoa(m.Size)}, m.URLs...), "\n")))
	return hex.EncodeToString(s[:8])
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// maxFailure bounds what is read of a failure record: a path, a reason.
const maxFailure = 64 << 10

func (h *Healer) readFailure(path string) (failure, bool) {
	// guard's own record: a link or FIFO in its place is none, never
	// followed or waited on (state.Replace writes over it).
	b, err := state.ReadRegular(h.failurePath(path), maxFailure, true)
	if err != nil {
		return failure{}, false
	}
	var f failure
	if json.Unmarshal(b, &f) != nil || time.Now().After(f.Until) {
		return failure{}, false
	}
	return f, true
}

// failure returns the remembered failure of path if it still holds for m.
func (h *Healer) failure(path string, m *manifest.Model) (failure, bool) {
	f, ok := h.readFailure(path)
	if !ok || f.Manifest != fingerprint(m) {
		return failure{}, false
	}
	return f, true
}

// LastFailure returns when guard will next try to heal the model at path
// and why the last try failed, while that back-off lasts.
func (h *Healer) LastFailure(path string) (until time.Time, reason string, ok bool) {
	f, ok := h.readFailure(path)
	return f.Until, f.Reason, ok
}

func (h *Healer) rememberFailure(path string, m *manifest.Model, reason string, backoff time.Duration) {
	now := time.Now()
	abs, _ := filepath.Abs(path)
	f := failure{Path: abs, At: now, Until: now.Add(backoff), Reason: reason, Manifest: fingerprint(m)}
	b, err := json.Marshal(f)
	if err != nil {
		return
	}
	if os.MkdirAll(h.layout().Failures(), 0o700) != nil {
		return
	}
	_ = state.Replace(h.failurePath(path), b, 0o600)
}

func (h *Healer) forgetFailure(path string) { _ = os.Remove(h.failurePath(path)) }
