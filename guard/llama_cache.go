package guard

import (
	"fmt"
	"path/filepath"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/promptcache"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// promptCache is the prompt cache as one llama call uses it, or nil when
// caching is off for the call (GUARD_CACHE=off, the tool's cache = false).
// Each attempt has its own key, so a stored answer is always what that
// attempt's tool and model printed: a repeat is answered for the attempt
// that answered before, after the attempts that failed before are tried
// again, and the answer names the model it really came from.
type promptCache struct {
	store    *promptcache.Store
	fileText string // text of the call's -f file, part of every key
}

func (e *Engine) promptCache(tool *manifest.Tool, fileText string) *promptCache {
	if e.c.CacheOff || (tool.Cache != nil && !*tool.Cache) {
		return nil
	}
	return &promptCache{store: e.PromptCache(), fileText: fileText}
}

// cachedAnswer looks attempt a up. A hit is a healthy call: it is counted
// in the cache's own figures (guard cache stats), never in the heal log.
func (l *attemptLoop) cachedAnswer(a shims.Attempt) (promptcache.Entry, bool) {
	e, pc := l.e, l.pc
	key := pc.key(e.c.M, a)
	if key == "" {
		return promptcache.Entry{}, false
	}
	entry, ok, _ := pc.store.Get(key)
	if e.c.Debug {
		e.debug("%s %s: prompt cache hit: %v", a.Tool, filepath.Base(a.Model), ok)
	}
	return entry, ok
}

// storeAnswer caches attempt a's good answer and logs what became of it: an
// answer larger than the whole cache, or than what a run keeps in memory
// (runner.CaptureMemory: the cache stores and replays an answer in one
// piece), or a cache folder guard cannot write, is not stored, and the log
// must not say it was.
func (l *attemptLoop) storeAnswer(a shims.Attempt, res runner.Result) {
	e, pc, name := l.e, l.pc, l.name
	// The key is made again: a heal may have replaced the model meanwhile.
	key := pc.key(e.c.M, a)
	if key == "" {
		return
	}
	ev := heallog.Event{Event: heallog.CacheStore, Tool: name, Target: a.Model, Bytes: res.Stdout.Len(), Result: "ok"}
	answer, whole := res.Stdout.Bytes()
	err := errAnswerTooLarge()
	if whole {
		err = pc.store.Put(key, promptcache.Entry{Stdout: answer, Seconds: res.Elapsed.Seconds()})
	}
	if err != nil {
		ev.Level, ev.Result, ev.Reason = "warn", "skipped", err.Error()
	}
	e.Event(ev)
}

// errAnswerTooLarge is why an answer past runner.CaptureMemory is not
// cached (made when needed: a call's start makes no error values).
func errAnswerTooLarge() error {
	return fmt.Errorf("an answer over %d MiB is not cached", runner.CaptureMemory>>20)
}

// key returns attempt a's prompt-cache key, or "" when it has none
// (caching off, no model, a model that cannot be read); m is the manifest
// that may pin a's model.
func (pc *promptCache) key(m *manifest.Manifest, a shims.Attempt) string {
	if pc == nil || a.Model == "" {
		return ""
	}
	var pinned string
	if m := m.ModelByFile(a.Model); m != nil {
		pinned = m.SHA256
	}
	id, err := promptcache.ModelID(a.Model, pinned)
	if err != nil {
		return ""
	}
	args := make([]string, len(a.Args))
	for i, arg := range a.Args {
		if arg == a.Model {
			arg = "model:" + id // the same model anywhere on disk is the same answer
		}
		args[i] = arg
	}
	in := promptcache.KeyInput{Tool: a.Tool, ModelID: id, Args: args}
	if pc.fileText != "" {
		in.FileText = []byte(pc.fileText)
	}
	return promptcache.Key(in)
}

// PromptCache is the prompt cache in guard's state folder, shared by
// every use.
func (e *Engine) PromptCache() *promptcache.Store { return e.prompts() }
