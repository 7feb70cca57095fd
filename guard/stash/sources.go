package stash

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/state"
)

// What each shared source last answered is kept in STATE/stash/sources.json,
// so that `guard status` and `guard which` can say it (docs/registry.md):
// a registry that is down or refuses costs a heal one line, and the next
// person to look sees why the fleet's builds are not coming back.

// SourceResult is a source's last answer to a restore.
type SourceResult struct {
	At     time.Time `json:"at"`
	Result Answer    `json:"result"`
	Reason string    `json:"reason,omitempty"`
}

// Answer is what a source answered (SourceResult.Result).
type Answer string

// A source's answers: an entry for the key, none, or an error (Reason
// says which); AnswerNeverAsked is status's word for a source no restore
// has asked yet.
const (
	AnswerOK         Answer = "ok"
	AnswerMiss       Answer = "miss"
	AnswerFailed     Answer = "failed"
	AnswerNeverAsked Answer = "never asked"
)

// maxSourcesFile bounds sources.json: one short record a source.
const maxSourcesFile = 256 << 10

func (s *Store) sourcesPath() string { return filepath.Join(s.Dir, "sources.json") }

// PushLog is the file the background push of recipe's entries
// (stash_to) writes: one a recipe, so that two recipes pushing at once do
// not write over each other.
func (s *Store) PushLog(recipe string) string {
	safe := []byte(recipe)
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			safe[i] = '_'
		}
	}
	name := string(safe)
	if name != recipe || len(name) > 64 {
		name = name[:min(len(name), 48)] + "-" + strings.TrimSuffix(entryName(recipe, ""), ".gst")[:12]
	}
	return filepath.Join(s.Dir, "push-"+name+".log")
}

// Redact is a source as it may be shown and kept: a password in its URL
// (https://user:token@host/…) replaced by xxxxx.
func Redact(src string) string {
	u, err := url.Parse(src)
	if err != nil || u.User == nil {
		return src
	}
	return u.Redacted()
}

// Sources returns what each source last answered, by its Redact form;
// none when nothing was asked yet or the file cannot be read.
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
	// Bounded: a note is not worth a wait on a process stopped holding
	// the lock (Ctrl-Z, SIGSTOP); it is dropped instead.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	held, err := lock.Acquire(ctx, filepath.Join(s.Dir, "sources.lock"), nil)
	if err != nil {
		return
	}
	defer held.Release()
	m := s.Sources()
	if m == nil {
		m = map[string]SourceResult{}
	}
	for src, r := range answers {
		m[Redact(src)] = r
	}
	if data, err := json.Marshal(m); err == nil && len(data) <= maxSourcesFile {
		_ = state.Replace(s.sourcesPath(), data, 0o600)
	}
}

// sourceResult is what err says of a source's answer.
func sourceResult(err error) SourceResult {
	r := SourceResult{At: time.Now(), Result: AnswerOK}
	switch {
	case errors.Is(err, ErrNoEntry):
		r.Result = AnswerMiss
	case err != nil:
		r.Result, r.Reason = AnswerFailed, strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return r
}

// A stash_to push that failed is pushed again (docs/registry.md): before
// the background push of an entry starts, a small marker says which entry
// of the recipe waits to reach which registry; the push removes it once
// the registry took the entry. A marker still there is a push not yet
// made: the next heal that restores the recipe, and `guard heal`, start
// it again, and `guard status` shows it. One marker a recipe: a newer
// entry's push replaces an older one's, which a registry no longer needs.

// PendingPush is an entry of a recipe not yet pushed to Dest.
type PendingPush struct {
	Recipe string    `json:"recipe"`
	Key    string    `json:"key"`
	Dest   string    `json:"dest"`
	Since  time.Time `json:"since"`    // when the first push of this entry started
	Tries  int       `json:"tries"`    // pushes started
	Last   time.Time `json:"last_try"` // when the last one started
}

// maxPendingFile bounds a marker: one short record.
const maxPendingFile = 16 << 10

func (s *Store) pendingPath(recipe string) string {
	return strings.TrimSuffix(s.PushLog(recipe), ".log") + ".pending"
}

// MarkPending records that the entry key of recipe is being pushed to
// dest and is not there yet; called before each background push starts.
func (s *Store) MarkPending(recipe, key, dest string) error {
	if err := s.folder(true); err != nil {
		return err
	}
	p, ok := s.Pending(recipe)
	if !ok || p.Key != key || p.Dest != dest {
		p = PendingPush{Recipe: recipe, Key: key, Dest: dest, Since: time.Now()}
	}
	p.Tries++
	p.Last = time.Now()
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return state.Replace(s.pendingPath(recipe), data, 0o600)
}

// Pending is the push of recipe's entry not yet made, if there is one.
func (s *Store) Pending(recipe string) (PendingPush, bool) {
	data, err := state.ReadRegular(s.pendingPath(recipe), maxPendingFile, true)
	if err != nil {
		return PendingPush{}, false
	}
	var p PendingPush
	if json.Unmarshal(data, &p) != nil || p.Recipe != recipe || p.Key == "" || p.Dest == "" {
		return PendingPush{}, false
	}
	return p, true
}

// ClearPending removes the marker of recipe when it names the entry key
// and dest: that push is made (or has nothing left to push).
func (s *Store) ClearPending(recipe, key, dest string) {
	if p, ok := s.Pending(recipe); ok && p.Key == key && p.Dest == dest {
		_ = os.Remove(s.pendingPath(recipe))
	}
}

// Holds reports whether the source src holds an entry of recipe for key
// that a trusted key claims to have signed, by the cheapest request it
// answers: one manifest request for a registry, its index for a folder or
// an https URL. Nothing is fetched or checked beyond that: a restore
// checks the entry. `guard heal --dry-run` says from it that a heal will
// restore rather than build.
func (s *Store) Holds(ctx context.Context, src, recipe, key string) (bool, error) {
	if registry.IsRef(src) {
		if s.Registry == nil {
			return false, errors.New("no registry client")
		}
		ref, err := registry.Parse(src)
		if err != nil {
			return false, err
		}
		repo, err := s.Registry.Open(ref)
		if err != nil {
			return false, err
		}
		m, err := repo.FetchManifest(ctx, ociTag(recipe, key))
		if errors.Is(err, registry.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return m.Annotations[annRecipe] == recipe && m.Annotations[annKey] == key &&
			namesTrusted(parseSigs([]byte(m.Annotations[annSignatures])), s.Trusted), nil
	}
	u, err := url.Parse(src)
	if err != nil {
		return false, err
	}
	var data []byte
	if u.Scheme == "file" {
		data, err = state.ReadRegular(filepath.Join(u.Path, "index"), maxIndex, false)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
	} else {
		data, err = httpGet(ctx, strings.TrimSuffix(src, "/")+"/index", maxIndex)
		if errors.Is(err, ErrNoEntry) {
			return false, nil
		}
	}
	if err != nil {
		return false, err
	}
	items, err := parseIndex(data)
	if err != nil {
		return false, err
	}
	for _, it := range items {
		if it.Recipe == recipe && it.Key == key {
			return len(s.Trusted) > 0, nil
		}
	}
	return false, nil
}
