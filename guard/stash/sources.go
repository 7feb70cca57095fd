package stash

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/state"
)

// What each shared source last answered is kept in STATE/stash/sources.json,
// so that `guard status` and `guard which` can say it (docs/registry.md):
// a registry that is down or refuses costs a heal one line, and the next
// person to look sees why the fleet's builds are not coming back.

// SourceResult is a source's last answer to a restore.
type SourceResult struct {
	At     time.Time `json:"at"`
	Result string    `json:"result"` // "ok", "miss" (no entry for the key), "failed"
	Reason string    `json:"reason,omitempty"`
}

// maxSourcesFile bounds sources.json: one short record a source.
const maxSourcesFile = 256 << 10

func (s *Store) sourcesPath() string { return filepath.Join(s.Dir, "sources.json") }

// Sources returns what each source last answered; none when nothing was
// asked yet or the file cannot be read.
func (s *Store) Sources() map[string]SourceResult {
	data, err := state.ReadRegular(s.sourcesPath(), maxSourcesFile, true)
	if err != nil {
		return nil
	}
	var m map[string]SourceResult
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

// noteSources records the answers of one restore. It never fails the
// restore: a state folder it cannot write is said elsewhere.
func (s *Store) noteSources(answers map[string]SourceResult) {
	if len(answers) == 0 || s.folder(true) != nil {
		return
	}
	held, err := lock.Acquire(context.Background(), filepath.Join(s.Dir, "sources.lock"), nil)
	if err != nil {
		return
	}
	defer held.Release()
	m := s.Sources()
	if m == nil {
		m = map[string]SourceResult{}
	}
	for src, r := range answers {
		m[src] = r
	}
	if data, err := json.Marshal(m); err == nil && len(data) <= maxSourcesFile {
		_ = state.Replace(s.sourcesPath(), data, 0o600)
	}
}

// sourceResult is what err says of a source's answer.
func sourceResult(err error) SourceResult {
	r := SourceResult{At: time.Now(), Result: "ok"}
	switch {
	case errors.Is(err, ErrNoEntry):
		r.Result = "miss"
	case err != nil:
		r.Result, r.Reason = "failed", oneLine(err.Error())
	}
	return r
}

func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}
