package models_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/models"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// server serves data, counting requests; slow makes each response trickle
// so that concurrent callers really overlap.
type server struct {
	*httptest.Server
	requests atomic.Int64
}

func serve(t *testing.T, status int, data []byte, slow time.Duration) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed) // declares nothing
			return
		}
		s.requests.Add(1)
		if status != http.StatusOK {
			w.WriteHeader(status)
			w.Write([]byte("Entry not found"))
			return
		}
		if slow == 0 {
			http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		for i := 0; i < len(data); i += len(data)/4 + 1 {
			w.Write(data[i:min(len(data), i+len(data)/4+1)])
			w.(http.Flusher).Flush()
			time.Sleep(slow)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// ensureAll heals m at each of paths at once, as many agent calls would,
// and fails the test for each caller that fails.
func ensureAll(t *testing.T, h *models.Healer, m *manifest.Model, paths ...string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(paths))
	for _, path := range paths {
		wg.Go(func() { errs <- h.Ensure(context.Background(), "t", m, path, false) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func healer(t *testing.T) (*models.Healer, *guardtest.Recorder, *guardtest.Buffer) {
	ev, errOut := &guardtest.Recorder{}, &guardtest.Buffer{}
	return &models.Healer{
		StateDir:       filepath.Join(t.TempDir(), "state"),
		Log:            ev.Log,
		Stderr:         errOut,
		HealTimeout:    20 * time.Second,
		FailureBackoff: time.Hour,
		FetchBackoff:   time.Millisecond,
		RateWindow:     5 * time.Second,
	}, ev, errOut
}

func TestHealthyNeedsNothing(t *testing.T) {
	h, ev, _ := healer(t)
	data := guardtest.GGUF(4096)
	path := filepath.Join(t.TempDir(), "m.gguf")
	os.WriteFile(path, data, 0o644)
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), URLs: []string{"http://127.0.0.1:1/never"}}
	if err := h.Ensure(context.Background(), "llama-completion", m, path, false); err != nil {
		t.Fatal(err)
	}
	if len(ev.All()) != 0 {
		t.Fatalf("events %+v, want none", ev.All())
	}
	if _, err := os.Stat(filepath.Join(h.StateDir, "locks")); !os.IsNotExist(err) {
		t.Fatal("a lock was taken for a healthy model")
	}
}

func TestDownloadsAtTheCallsPath(t *testing.T) {
	h, ev, errOut := healer(t)
	data := guardtest.GGUF(300_000)
	srv := serve(t, http.StatusOK, data, 0)
	// Not the manifest's models_dir: the path the call named, in a folder
	// that does not exist yet.
	path := filepath.Join(t.TempDir(), "elsewhere", "deeper", "Qwen3-0.6B-Q4_K_M.gguf")
	m := &manifest.Model{File: "Qwen3-0.6B-Q4_K_M.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL + "/Qwen_Qwen3-0.6B-Q4_K_M.gguf"}}
	if st := h.Check(m, path); st != verify.Missing {
		t.Fatalf("Check = %s, want missing", st)
	}
	if err := h.Ensure(context.Background(), "llama-completion", m, path, false); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data) {
		t.Fatal("downloaded file differs")
	}
	if st := h.Check(m, path); st != verify.OK {
		t.Fatalf("Check after heal = %s, want ok (stamped)", st)
	}
	dl := ev.Named("model.download")
	if len(dl) != 1 || dl[0].Result != "ok" || dl[0].Bytes != int64(len(data)) || dl[0].Tool != "llama-completion" || dl[0].Target != path {
		t.Fatalf("model.download events %+v", dl)
	}
	if !strings.Contains(errOut.String(), "is missing; downloading") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

func TestStaleStampHashesOnce(t *testing.T) {
	h, ev, _ := healer(t)
	data := guardtest.GGUF(100_000)
	srv := serve(t, http.StatusOK, data, 0)
	path := filepath.Join(t.TempDir(), "m.gguf")
	os.WriteFile(path, data, 0o644)
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL}}
	if st := h.Check(m, path); st != verify.Stale {
		t.Fatalf("Check = %s, want stale", st)
	}
	if err := h.Ensure(context.Background(), "t", m, path, false); err != nil {
		t.Fatal(err)
	}
	if srv.requests.Load() != 0 {
		t.Fatal("a good file was downloaded again")
	}
	if v := ev.Named("model.verify"); len(v) != 1 || v[0].Result != "ok" {
		t.Fatalf("model.verify events %+v", v)
	}
	if st := h.Check(m, path); st != verify.OK {
		t.Fatalf("Check after verify = %s, want ok", st)
	}
}

func TestWrongContentIsReplaced(t *testing.T) {
	h, ev, _ := healer(t)
	data := guardtest.GGUF(100_000)
	srv := serve(t, http.StatusOK, data, 0)
	path := filepath.Join(t.TempDir(), "m.gguf")
	bad := append([]byte(nil), data...)
	bad[5000] ^= 0xff
	os.WriteFile(path, bad, 0o644)
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL}}
	if err := h.Ensure(context.Background(), "t", m, path, false); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data) {
		t.Fatal("bad file not replaced")
	}
	if v := ev.Named("model.verify"); len(v) != 1 || v[0].Result != "failed" || v[0].Reason != "hash-mismatch" {
		t.Fatalf("model.verify events %+v", v)
	}
}

func TestTwentyCallersOneDownload(t *testing.T) {
	h, ev, errOut := healer(t)
	data := guardtest.GGUF(400_000)
	srv := serve(t, http.StatusOK, data, 50*time.Millisecond)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL}}
	ensureAll(t, h, m, slices.Repeat([]string{path}, 20)...)
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
	if len(ev.Named("model.download")) != 1 {
		t.Fatalf("model.download events %+v", ev.Named("model.download"))
	}
	if len(ev.Named("lock.wait")) == 0 || !strings.Contains(errOut.String(), "another process is healing m.gguf; waiting") {
		t.Fatalf("no waiter reported: %q", errOut.String())
	}
}

func TestFailureIsRemembered(t *testing.T) {
	h, ev, _ := healer(t)
	srv := serve(t, http.StatusNotFound, nil, 0)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: 1000, URLs: []string{srv.URL + "/gone.gguf"}}
	ctx := context.Background()

	err := h.Ensure(ctx, "t", m, path, false)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("first Ensure: %v", err)
	}
	if dl := ev.Named("model.download"); len(dl) != 1 || dl[0].Result != "failed" || !strings.Contains(dl[0].Reason, "404") {
		t.Fatalf("model.download events %+v", dl)
	}
	err = h.Ensure(ctx, "t", m, path, false)
	if err == nil || !strings.Contains(err.Error(), "could not be healed") || !strings.Contains(err.Error(), "404") ||
		!strings.Contains(err.Error(), "guard heal m.gguf") {
		t.Fatalf("second Ensure: %v", err)
	}
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d requests after a remembered failure, want 1", n)
	}
	until, reason, ok := h.LastFailure(path)
	if !ok || !strings.Contains(reason, "404") || time.Until(until) < 50*time.Minute {
		t.Fatalf("LastFailure = %s %q %v", until, reason, ok)
	}

	// force (guard heal) tries again.
	if err := h.Ensure(ctx, "guard heal", m, path, true); err == nil {
		t.Fatal("forced Ensure succeeded against a 404")
	}
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d requests after force, want 2", n)
	}

	// A fixed manifest entry gets a fresh try at once.
	good := guardtest.GGUF(1000)
	fixed := serve(t, http.StatusOK, good, 0)
	m2 := *m
	m2.URLs = []string{fixed.URL}
	if err := h.Ensure(ctx, "t", &m2, path, false); err != nil {
		t.Fatalf("Ensure with fixed urls: %v", err)
	}
	if _, _, ok := h.LastFailure(path); ok {
		t.Fatal("failure still remembered after a successful heal")
	}
}

func TestFailureBackoffExpires(t *testing.T) {
	h, _, _ := healer(t)
	h.FailureBackoff = 50 * time.Millisecond
	srv := serve(t, http.StatusNotFound, nil, 0)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: 1000, URLs: []string{srv.URL}}
	h.Ensure(context.Background(), "t", m, path, false)
	time.Sleep(100 * time.Millisecond)
	h.Ensure(context.Background(), "t", m, path, false)
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d requests, want 2 (the back-off ran out)", n)
	}
}

func TestNotEnoughSpace(t *testing.T) {
	h, ev, _ := healer(t)
	srv := serve(t, http.StatusOK, guardtest.GGUF(10), 0)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: 1 << 60, URLs: []string{srv.URL}}
	err := h.Ensure(context.Background(), "t", m, path, false)
	if err == nil || !strings.Contains(err.Error(), "needs 1152921504606846976 more bytes") {
		t.Fatalf("err = %v", err)
	}
	if srv.requests.Load() != 0 {
		t.Fatal("downloaded although it cannot fit")
	}
	if _, _, ok := h.LastFailure(path); ok {
		t.Fatal("a full disk was remembered as a failed heal")
	}
	if dl := ev.Named("model.download"); len(dl) != 1 || dl[0].Result != "failed" {
		t.Fatalf("model.download events %+v", dl)
	}
}

func TestNoURLs(t *testing.T) {
	h, _, _ := healer(t)
	path := filepath.Join(t.TempDir(), "m.gguf")
	err := h.Ensure(context.Background(), "t", &manifest.Model{File: "m.gguf", Size: 10}, path, false)
	if err == nil || !strings.Contains(err.Error(), "no urls") {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitIsBounded(t *testing.T) {
	h, ev, _ := healer(t)
	h.HealTimeout = 150 * time.Millisecond
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: 10, URLs: []string{"http://127.0.0.1:1/x"}}
	// Hold the model's lock the way another healer would: find it by
	// letting a first Ensure create it, then take every lock file there.
	os.MkdirAll(filepath.Join(h.StateDir, "locks"), 0o700)
	h.Ensure(context.Background(), "t", m, path, true) // fails fast: connection refused
	locks, _ := filepath.Glob(filepath.Join(h.StateDir, "locks", "*.lock"))
	if len(locks) != 1 {
		t.Fatalf("lock files %v", locks)
	}
	held, err := lock.Acquire(context.Background(), locks[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	err = h.Ensure(context.Background(), "t", m, path, true)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after") ||
		!strings.Contains(err.Error(), "waiting for another process's download") {
		t.Fatalf("err = %v, want a bounded wait", err)
	}
	if len(ev.Named("lock.wait")) != 1 {
		t.Fatalf("lock.wait events %+v", ev.Named("lock.wait"))
	}
}

// A heal whose time runs out while the download retries names the failure
// it was retrying after, not only the timeout.
func TestTimeoutWhileRetryingNamesTheFailure(t *testing.T) {
	h, _, _ := healer(t)
	h.HealTimeout = 300 * time.Millisecond
	var gets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			return // declares nothing
		}
		if gets.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		<-r.Context().Done() // the retry hangs until the heal's time is up
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: 10, URLs: []string{srv.URL + "/m.gguf"}}
	err := h.Ensure(context.Background(), "t", m, path, false)
	t.Log(err)
	var te *models.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a *TimeoutError", err)
	}
	if !strings.Contains(err.Error(), "it was retrying after: ") || !strings.Contains(te.LastFailure, "503") {
		t.Fatalf("err = %v, want it to name the 503 it was retrying after", err)
	}
}

func TestCancelIsNotRemembered(t *testing.T) {
	h, _, _ := healer(t)
	data := guardtest.GGUF(400_000)
	srv := serve(t, http.StatusOK, data, 100*time.Millisecond)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), URLs: []string{srv.URL}}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if err := h.Ensure(ctx, "t", m, path, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, _, ok := h.LastFailure(path); ok {
		t.Fatal("a cancelled heal was remembered as a failure")
	}
}

func TestCheckUnknown(t *testing.T) {
	dir := t.TempDir()
	good, html, empty := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf"), filepath.Join(dir, "c.gguf")
	guardtest.WriteGGUF(t, good, 100)
	os.WriteFile(html, []byte("<!DOCTYPE html><html>"), 0o644)
	os.WriteFile(empty, nil, 0o644)
	if err := models.CheckUnknown(good); err != nil {
		t.Fatal(err)
	}
	if err := models.CheckUnknown(filepath.Join(dir, "x.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
	var he *verify.HeaderError
	if err := models.CheckUnknown(html); !errors.As(err, &he) || he.Kind != "html" {
		t.Fatalf("html: %v", err)
	}
	if err := models.CheckUnknown(empty); !errors.As(err, &he) || he.Kind != "empty" {
		t.Fatalf("empty: %v", err)
	}
}

func TestPinHashesAndStamps(t *testing.T) {
	h, ev, _ := healer(t)
	data := guardtest.GGUF(70_000)
	path := filepath.Join(t.TempDir(), "m.gguf")
	os.WriteFile(path, data, 0o644)
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: strings.Repeat("0", 64)}
	got, err := h.Pin(m, path, true)
	if err != nil || got != guardtest.Sum(data) {
		t.Fatalf("Pin = %q, %v; want %s", got, err, guardtest.Sum(data))
	}
	// The stamp Pin wrote makes the new pin hold without a rehash.
	m.SHA256 = got
	if st := h.Check(m, path); st != verify.OK {
		t.Fatalf("Check after Pin = %s, want ok", st)
	}
	if len(ev.All()) != 0 {
		t.Fatalf("events %+v, want none: pinning is not a heal", ev.All())
	}
	if _, err := h.Pin(&manifest.Model{File: "m.gguf", Size: int64(len(data)) + 1}, path, false); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("Pin of a file of the wrong size = %v, want a truncated error", err)
	}
	if _, err := h.Pin(m, filepath.Join(t.TempDir(), "absent.gguf"), false); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Pin of a missing file = %v, want a missing error", err)
	}
}

// A heal stops at the deadline the caller gives (what remains of its
// call's budget), says it timed out, keeps the partial file for the next
// call, and remembers nothing: running out of time says nothing about the
// source.
func TestDeadlineKeepsPartialAndIsNotRemembered(t *testing.T) {
	h, ev, _ := healer(t)
	data := guardtest.GGUF(1 << 20)
	srv := serve(t, http.StatusOK, data, 0)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data[:600_000]) // past the first flush to disk
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), URLs: []string{srv.URL}}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := h.Ensure(ctx, "llama-completion", m, path, false)
	if err == nil || !strings.Contains(err.Error(), "timed out") || strings.Contains(err.Error(), "deadline exceeded") ||
		!strings.Contains(err.Error(), "the call's time limit") {
		t.Fatalf("err = %v, want a timed out heal", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(err, context.DeadlineExceeded) = false for %v", err)
	}
	if fi, err := os.Stat(path + ".partial"); err != nil || fi.Size() < 512<<10 {
		t.Fatalf("partial file not kept: %v %v", fi, err)
	}
	if _, _, ok := h.LastFailure(path); ok {
		t.Fatal("a deadline was remembered as a failure of the source")
	}
	if dl := ev.Named("model.download"); len(dl) != 1 || !strings.Contains(dl[0].Reason, "timed out") {
		t.Fatalf("model.download events %+v", dl)
	}

	// The heal's own limit is named as such.
	h.HealTimeout = 300 * time.Millisecond
	err = h.Ensure(context.Background(), "guard heal", m, path, true)
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "[budget] heal") {
		t.Fatalf("err = %v, want a heal that timed out at [budget] heal", err)
	}
}

// One bad mirror is not the end, and not a failure to remember: only a
// heal for which every url failed is.
func TestOneBadMirrorIsNotRemembered(t *testing.T) {
	h, _, _ := healer(t)
	data := guardtest.GGUF(100_000)
	stale := serve(t, http.StatusOK, guardtest.GGUF(5000), 0)
	good := serve(t, http.StatusOK, data, 0)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), URLs: []string{stale.URL, good.URL}}
	if err := h.Ensure(context.Background(), "t", m, path, false); err != nil {
		t.Fatal(err)
	}
	if good.requests.Load() != 1 {
		t.Fatalf("the good mirror got %d requests", good.requests.Load())
	}
	if _, _, ok := h.LastFailure(path); ok {
		t.Fatal("a failure was remembered although a url served the file")
	}

	os.Remove(path)
	m.URLs = []string{stale.URL, stale.URL + "/again"}
	if err := h.Ensure(context.Background(), "t", m, path, false); err == nil {
		t.Fatal("healed from two stale mirrors")
	}
	if _, reason, ok := h.LastFailure(path); !ok || !strings.Contains(reason, "every url failed") {
		t.Fatalf("LastFailure = %q %v, want every url's failure remembered", reason, ok)
	}
}

// The same model reached through two paths (a symlinked folder) is one
// file: one lock, one download, and no caller fails because another is
// writing it.
func TestTwoPathsOneDownload(t *testing.T) {
	h, _, _ := healer(t)
	data := guardtest.GGUF(400_000)
	srv := serve(t, http.StatusOK, data, 50*time.Millisecond)
	dir := t.TempDir()
	real, alias := filepath.Join(dir, "models"), filepath.Join(dir, "alias")
	os.Mkdir(real, 0o755)
	if err := os.Symlink(real, alias); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL}}
	ensureAll(t, h, m, slices.Repeat([]string{filepath.Join(real, "m.gguf"), filepath.Join(alias, "m.gguf")}, 5)...)
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
	if fs, _ := filepath.Glob(filepath.Join(h.StateDir, "failures", "*")); len(fs) != 0 {
		t.Fatalf("failures remembered: %v", fs)
	}
}

// A lock file deleted while a download runs (a cleaner, a person) lets a
// second healer in: it waits on the partial file's own lock instead of
// failing, and nothing is remembered as a failure.
func TestLockFileDeletedMidHeal(t *testing.T) {
	h, ev, errOut := healer(t)
	data := guardtest.GGUF(1 << 20)
	srv := serve(t, http.StatusOK, data, 150*time.Millisecond)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), URLs: []string{srv.URL}}
	first := make(chan error, 1)
	go func() { first <- h.Ensure(context.Background(), "first", m, path, false) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(path + ".partial"); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first download never wrote its partial file")
		}
		time.Sleep(5 * time.Millisecond)
	}
	locks, _ := filepath.Glob(filepath.Join(h.StateDir, "locks", "*"))
	for _, l := range locks {
		os.Remove(l)
	}
	ensureAll(t, h, m, path, path)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data) {
		t.Fatal("the model is not the served file")
	}
	if n := srv.requests.Load(); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
	if _, _, ok := h.LastFailure(path); ok {
		t.Error("someone else downloading was remembered as a failure")
	}
	for _, e := range ev.Named("model.download") {
		if e.Result != "ok" {
			t.Errorf("model.download %+v", e)
		}
	}
	if !strings.Contains(errOut.String(), "another process is downloading m.gguf; waiting") {
		t.Errorf("stderr %q", errOut.String())
	}
}

// Offline, a heal fails at once with "offline?" and is remembered only
// briefly: the network comes back by itself.
func TestOfflineRememberedBriefly(t *testing.T) {
	h, _, _ := healer(t)
	var dials atomic.Int64
	h.Client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "huggingface.co", IsNotFound: true}}
		},
	}}
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: 1000, URLs: []string{"https://huggingface.co/a/resolve/main/m.gguf"}}
	err := h.Ensure(context.Background(), "guard heal", m, path, true)
	if err == nil || !strings.Contains(err.Error(), "offline?") {
		t.Fatalf("err = %v", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	until, _, ok := h.LastFailure(path)
	if !ok || time.Until(until) > 2*time.Minute {
		t.Fatalf("LastFailure until %s (ok %v), want a brief memory (FailureBackoff is an hour)", until, ok)
	}
}

// A model that has a pin keeps it: the file is verified against the pin,
// and a file whose bytes changed (size and mtime kept, as `touch -r`
// does) is an error naming both sums, never a new pin, unless forced.
func TestPinNeverOverwritesAPin(t *testing.T) {
	h, _, _ := healer(t)
	data := guardtest.GGUF(70_000)
	path := filepath.Join(t.TempDir(), "m.gguf")
	os.WriteFile(path, data, 0o644)
	pin := guardtest.Sum(data)
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: pin}

	// Stale (the state folder was evicted): verified, the pin kept.
	if got, err := h.Pin(m, path, false); err != nil || got != pin {
		t.Fatalf("Pin of a good pinned file = %q, %v", got, err)
	}

	fi, _ := os.Stat(path)
	tampered := append([]byte(nil), data...)
	tampered[5000] ^= 0xff
	os.WriteFile(path, tampered, 0o644)
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	got, err := h.Pin(m, path, false)
	var pm *models.PinMismatchError
	if !errors.As(err, &pm) || got != "" {
		t.Fatalf("Pin of a tampered file = %q, %v; want a *PinMismatchError", got, err)
	}
	for _, want := range []string{pin, guardtest.Sum(tampered), "--force", "guard heal m.gguf"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if st := h.Check(m, path); st != verify.HashMismatch {
		t.Fatalf("Check after a refused pin = %s, want hash-mismatch", st)
	}

	// Forced: the file as it is.
	if got, err := h.Pin(m, path, true); err != nil || got != guardtest.Sum(tampered) {
		t.Fatalf("forced Pin = %q, %v", got, err)
	}
}

// Seen tells status a model that was never here from one evicted since:
// the stamp a download writes is a small file in the state folder and
// outlives the model.
func TestSeenSurvivesEviction(t *testing.T) {
	h, _, _ := healer(t)
	data := guardtest.GGUF(100_000)
	srv := serve(t, http.StatusOK, data, 0)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL}}
	if s := h.Seen(m, path); s.Ever {
		t.Fatalf("Seen before any download = %+v", s)
	}
	os.WriteFile(path+".partial", data[:30_000], 0o644)
	if s := h.Seen(m, path); s.Ever || s.Partial != 30_000 {
		t.Fatalf("Seen with a partial = %+v, want 30000 bytes to resume", s)
	}
	if err := h.Ensure(context.Background(), "t", m, path, false); err != nil {
		t.Fatal(err)
	}
	s := h.Seen(m, path)
	if !s.Ever || s.DeclaredBy != "manifest" || s.Partial != 0 {
		t.Fatalf("Seen after the download = %+v", s)
	}
	os.Remove(path) // evicted
	if s := h.Seen(m, path); !s.Ever {
		t.Fatalf("Seen after eviction = %+v, want the record", s)
	}
	if st := h.Check(m, path); st != verify.Missing {
		t.Fatalf("Check = %s", st)
	}
}

// hub answers like huggingface.co/<repo>/resolve/<rev>/<file>: a 302 to
// its CDN carrying X-Linked-Size and X-Linked-Etag, for HEAD and GET.
func hub(t *testing.T, data []byte, sum string) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/cdn/") {
			if r.Method == http.MethodGet {
				s.requests.Add(1)
			}
			http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(data))
			return
		}
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		http.Redirect(w, r, "/cdn/m.gguf", http.StatusFound)
	}))
	t.Cleanup(s.Close)
	return s
}

// With no pin, a model from a server that declares its sha256 is verified
// against it while downloading and counts as ok, saying who declared it.
func TestDeclaredHashMakesItOK(t *testing.T) {
	h, _, _ := healer(t)
	data := guardtest.GGUF(100_000)
	srv := hub(t, data, guardtest.Sum(data))
	src := srv.URL + "/org/m/resolve/main/m.gguf"
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), URLs: []string{src}}
	if err := h.Ensure(context.Background(), "t", m, path, false); err != nil {
		t.Fatal(err)
	}
	if st := h.Check(m, path); st != verify.OK {
		t.Fatalf("Check = %s, want ok", st)
	}
	if s := h.Seen(m, path); s.DeclaredBy != src {
		t.Fatalf("Seen = %+v, want declared by %s", s, src)
	}
	d, err := h.Declared(context.Background(), m)
	if err != nil || d.SHA256 != guardtest.Sum(data) || d.URL != src {
		t.Fatalf("Declared = %+v, %v", d, err)
	}
	if srv.requests.Load() != 1 {
		t.Fatalf("%d downloads, want 1 (Declared downloads nothing)", srv.requests.Load())
	}
}

// TestTwoPathsOneDownload with a symlinked file rather than folder, the
// model evicted (the link dangles): the download lands at the link's
// target, the link stays a link, and both paths are one file, one lock.
func TestSymlinkedFileHealsAtItsTarget(t *testing.T) {
	h, _, _ := healer(t)
	data := guardtest.GGUF(400_000)
	srv := serve(t, http.StatusOK, data, 50*time.Millisecond)
	dir := t.TempDir()
	real, alias := filepath.Join(dir, "models", "m.gguf"), filepath.Join(dir, "alias", "m.gguf")
	os.MkdirAll(filepath.Dir(real), 0o755)
	os.MkdirAll(filepath.Dir(alias), 0o755)
	// Relative, through a second link: each hop is read against its own
	// link's folder.
	if err := os.Symlink("../models/m.gguf", filepath.Join(dir, "alias", "hop.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("hop.gguf", alias); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL}}
	ensureAll(t, h, m, slices.Repeat([]string{real, alias}, 5)...)
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d downloads, want 1", n)
	}
	if fi, err := os.Lstat(alias); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(real); !bytes.Equal(b, data) {
		t.Fatalf("the target holds %d bytes, want the model", len(b))
	}
	for _, p := range []string{real, alias} {
		if st := h.Check(m, p); st != verify.OK {
			t.Errorf("Check(%s) = %s after the heal, want ok without a rehash", p, st)
		}
	}
}

// A link guard must not follow (another user's, in a shared folder) is an
// error naming it; neither the link nor what it names is touched.
func TestSymlinkOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a link away")
	}
	h, _, _ := healer(t)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep me"), 0o644)
	link := filepath.Join(dir, "m.gguf")
	os.Symlink(victim, link)
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Model{File: "m.gguf", Size: 100, URLs: []string{"http://127.0.0.1:1/never"}}
	err := h.Ensure(context.Background(), "t", m, link, false)
	if err == nil || !strings.Contains(err.Error(), link+" is a symlink of uid 65534") {
		t.Fatalf("err = %v, want the link refused", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me" {
		t.Fatalf("the victim was written: %q", b)
	}
}

// A link whose target lands in another user's folder is refused, though
// the link is guard's own user's.
func TestSymlinkIntoAnotherUsersFolderIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a folder away")
	}
	h, _, _ := healer(t)
	dir := t.TempDir()
	theirs := filepath.Join(dir, "theirs")
	os.Mkdir(theirs, 0o755)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "m.gguf")
	os.Symlink(filepath.Join(theirs, "m.gguf"), link)
	m := &manifest.Model{File: "m.gguf", Size: 100, URLs: []string{"http://127.0.0.1:1/never"}}
	err := h.Ensure(context.Background(), "t", m, link, false)
	if err == nil || !strings.Contains(err.Error(), "a folder of uid 65534") {
		t.Fatalf("err = %v, want the target's folder refused", err)
	}
	if des, _ := os.ReadDir(theirs); len(des) != 0 {
		t.Fatalf("guard wrote into another user's folder: %v", des)
	}
}

// What is at a model path and is not a file (a FIFO, a folder) is said,
// never waited on and never replaced: guard did not make it.
func TestNotRegularIsNeitherWaitedOnNorReplaced(t *testing.T) {
	h, _, _ := healer(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "m.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Model{File: "m.gguf", Size: 100, URLs: []string{"http://127.0.0.1:1/never"}}
	guardtest.Within(t, "a FIFO at the model path", func() {
		if st := h.Check(m, fifo); st != verify.NotRegular {
			t.Errorf("Check = %s, want %s", st, verify.NotRegular)
		}
		err := h.Ensure(context.Background(), "t", m, fifo, true)
		if err == nil || !strings.Contains(err.Error(), fifo+" is a FIFO, not a regular file; guard replaces only files it made") {
			t.Errorf("Ensure = %v", err)
		}
		if err := models.CheckUnknown(fifo); !errors.Is(err, state.ErrNotRegular) || !strings.Contains(err.Error(), "a FIFO") {
			t.Errorf("CheckUnknown = %v, want a FIFO, not a regular file", err)
		}
	})
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
}

// guard's own records are read without waiting on a FIFO planted there.
func TestFailureRecordAFIFO(t *testing.T) {
	h, _, _ := healer(t)
	path := filepath.Join(t.TempDir(), "m.gguf")
	m := &manifest.Model{File: "m.gguf", Size: 100, URLs: []string{"http://127.0.0.1:1/never"}}
	if err := h.Ensure(context.Background(), "t", m, path, false); err == nil {
		t.Fatal("a download from a closed port worked")
	}
	records, _ := filepath.Glob(filepath.Join(h.StateDir, "failures", "*"))
	if len(records) != 1 {
		t.Fatalf("failure records %v, want one", records)
	}
	os.Remove(records[0])
	if err := syscall.Mkfifo(records[0], 0o600); err != nil {
		t.Fatal(err)
	}
	guardtest.Within(t, "LastFailure with a FIFO for its record", func() {
		if _, _, ok := h.LastFailure(path); ok {
			t.Error("a FIFO read as a failure record")
		}
	})
}

// A FIFO planted at the partial file, locked by another process, is no
// download to wait for: the heal replaces it and downloads at once rather
// than waiting out its time limit.
func TestLockedFIFOAtThePartialIsNotWaitedOn(t *testing.T) {
	h, ev, errOut := healer(t)
	h.HealTimeout = 5 * time.Second
	data := guardtest.GGUF(4096)
	srv := serve(t, http.StatusOK, data, 0)
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := syscall.Mkfifo(path+".partial", 0o644); err != nil {
		t.Fatal(err)
	}
	// O_RDWR: a FIFO opened for both ends does not wait for the other.
	f, err := os.OpenFile(path+".partial", os.O_RDWR|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Model{File: "m.gguf", Size: int64(len(data)), SHA256: guardtest.Sum(data), URLs: []string{srv.URL + "/m.gguf"}}
	if err := h.Ensure(context.Background(), "t", m, path, false); err != nil {
		t.Fatalf("Ensure: %v\n%s", err, errOut.String())
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("model after the heal: %d bytes, %v", len(got), err)
	}
	if n := len(ev.Named("lock.wait")); n != 0 {
		t.Errorf("%d lock.wait events: the heal waited on the planted FIFO", n)
	}
}
