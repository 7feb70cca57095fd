package promptcache_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/promptcache"
)

// clock is a fake Store.Now that tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T) (*promptcache.Store, *clock) {
	t.Helper()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	return &promptcache.Store{Dir: filepath.Join(t.TempDir(), "prompts"), Now: c.now}, c
}

func keyOf(s string) string {
	return promptcache.Key(promptcache.KeyInput{Tool: "llama-completion", ModelID: "m", Args: []string{"-p", s}})
}

func mustPut(t *testing.T, s *promptcache.Store, key string, out []byte) {
	t.Helper()
	if err := s.Put(key, promptcache.Entry{Stdout: out, Seconds: 1}); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

func mustGet(t *testing.T, s *promptcache.Store, key string) (promptcache.Entry, bool) {
	t.Helper()
	e, ok, err := s.Get(key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return e, ok
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func TestRoundTripKeepsEveryByte(t *testing.T) {
	s, clk := newStore(t)
	out := []byte("hi \xff\xfe\x00 \xc3\x28 end\n")
	k := keyOf("bytes")
	if err := s.Put(k, promptcache.Entry{Stdout: out, Seconds: 2.5}); err != nil {
		t.Fatal(err)
	}
	e, ok := mustGet(t, s, k)
	if !ok {
		t.Fatal("Get after Put: miss")
	}
	if !bytes.Equal(e.Stdout, out) {
		t.Fatalf("Stdout = %q, want %q", e.Stdout, out)
	}
	if e.Seconds != 2.5 || !e.Created.Equal(clk.now()) {
		t.Fatalf("Seconds, Created = %v, %v; want 2.5, %v", e.Seconds, e.Created, clk.now())
	}
}

func TestEmptyStdoutIsNotStored(t *testing.T) {
	s, _ := newStore(t)
	k := keyOf("empty")
	for _, out := range [][]byte{nil, {}} {
		if err := s.Put(k, promptcache.Entry{Stdout: out, Seconds: 3}); err != nil {
			t.Fatalf("Put(%q) = %v, want nil", out, err)
		}
	}
	if exists(s.Dir) {
		t.Fatal("an empty Put created the cache dir")
	}
	if _, ok := mustGet(t, s, k); ok {
		t.Fatal("empty stdout was stored")
	}
}

func TestCorruptEntryIsAMissAndReplaced(t *testing.T) {
	good := bytes.Repeat([]byte("answer "), 20)
	tests := []struct {
		name   string
		mangle func([]byte) []byte
	}{
		{"flipped payload byte", func(b []byte) []byte { b[len(b)-3] ^= 0x01; return b }},
		{"flipped magic", func(b []byte) []byte { b[0] ^= 0x20; return b }},
		{"flipped length", func(b []byte) []byte { b[28]++; return b }},
		{"flipped checksum", func(b []byte) []byte { b[40] ^= 0x80; return b }},
		{"truncated payload", func(b []byte) []byte { return b[:len(b)-1] }},
		{"truncated header", func(b []byte) []byte { return b[:10] }},
		{"trailing byte", func(b []byte) []byte { return append(b, 'x') }},
		{"empty file", func([]byte) []byte { return nil }},
		{"garbage", func([]byte) []byte {
			return []byte("<html>Entry not found</html> and more text to pass the header size check")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newStore(t)
			k := keyOf(tt.name)
			mustPut(t, s, k, good)
			path := filepath.Join(s.Dir, k)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.mangle(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, ok := mustGet(t, s, k); ok {
				t.Fatal("corrupt entry was a hit")
			}
			if exists(path) {
				t.Fatal("corrupt entry was not removed")
			}
			mustPut(t, s, k, good)
			if e, ok := mustGet(t, s, k); !ok || !bytes.Equal(e.Stdout, good) {
				t.Fatalf("after a fresh Put: ok=%v stdout=%q", ok, e.Stdout)
			}
		})
	}
}

func TestSymlinkEntryIsNotFollowed(t *testing.T) {
	s, _ := newStore(t)
	k := keyOf("link")
	mustPut(t, s, k, []byte("real"))
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("do not touch"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Dir, k)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, ok := mustGet(t, s, k); ok {
		t.Fatal("a symlink entry was a hit")
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "do not touch" {
		t.Fatalf("symlink target changed: %q, %v", b, err)
	}
}

func TestTTLExpiresByCreation(t *testing.T) {
	s, clk := newStore(t)
	s.TTL = time.Hour
	k := keyOf("ttl")
	mustPut(t, s, k, []byte("fresh"))
	clk.add(50 * time.Minute)
	if _, ok := mustGet(t, s, k); !ok {
		t.Fatal("entry expired before its TTL")
	}
	// The hit above must not extend the life of the entry.
	clk.add(11 * time.Minute)
	if _, ok := mustGet(t, s, k); ok {
		t.Fatal("entry older than TTL was a hit")
	}
	if exists(filepath.Join(s.Dir, k)) {
		t.Fatal("expired entry was not removed")
	}
}

func TestTTLZeroNeverExpires(t *testing.T) {
	s, clk := newStore(t)
	k := keyOf("forever")
	mustPut(t, s, k, []byte("old"))
	clk.add(10 * 365 * 24 * time.Hour)
	if _, ok := mustGet(t, s, k); !ok {
		t.Fatal("entry expired with TTL 0")
	}
}

func TestPutSweepsEntriesUnusedPastTTL(t *testing.T) {
	s, clk := newStore(t)
	s.TTL = time.Hour
	mustPut(t, s, keyOf("stale"), []byte("stale"))
	clk.add(2 * time.Hour)
	mustPut(t, s, keyOf("new"), []byte("new"))
	if exists(filepath.Join(s.Dir, keyOf("stale"))) {
		t.Fatal("an entry unused for longer than TTL survived a Put")
	}
}

func TestLRUEvictionUnderCap(t *testing.T) {
	s, clk := newStore(t)
	payload := bytes.Repeat([]byte("x"), 100)
	const entrySize = 68 + 100
	s.MaxBytes = 3 * entrySize
	put := func(name string) { clk.add(time.Second); mustPut(t, s, keyOf(name), payload) }
	present := func(name string) bool { return exists(filepath.Join(s.Dir, keyOf(name))) }

	put("a")
	put("b")
	put("c")
	clk.add(time.Second)
	if _, ok := mustGet(t, s, keyOf("a")); !ok { // a is now the most recently used
		t.Fatal("a: miss")
	}
	put("d")
	for name, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if present(name) != want {
			t.Errorf("after d: %s present = %v, want %v", name, !want, want)
		}
	}
	put("e")
	for name, want := range map[string]bool{"a": true, "c": false, "d": true, "e": true} {
		if present(name) != want {
			t.Errorf("after e: %s present = %v, want %v", name, !want, want)
		}
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 3 || st.Bytes != 3*entrySize {
		t.Fatalf("Stats = %+v, want 3 entries, %d bytes", st, 3*entrySize)
	}
}

func TestPutLargerThanCap(t *testing.T) {
	s, _ := newStore(t)
	s.MaxBytes = 100
	err := s.Put(keyOf("big"), promptcache.Entry{Stdout: make([]byte, 100)})
	if !errors.Is(err, promptcache.ErrTooLarge) {
		t.Fatalf("Put = %v, want ErrTooLarge", err)
	}
	if _, ok := mustGet(t, s, keyOf("big")); ok {
		t.Fatal("an entry over the cap was stored")
	}
}

func TestConcurrentPutGetSameKey(t *testing.T) {
	s, _ := newStore(t)
	s.Now = nil
	k := keyOf("shared")
	const workers, rounds = 16, 10
	// Distinct, large payloads: a torn write would mix them or break the sum.
	payload := func(w int) []byte { return bytes.Repeat([]byte{byte('A' + w)}, 64<<10) }
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*2)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if err := s.Put(k, promptcache.Entry{Stdout: payload(w), Seconds: 1}); err != nil {
					errs <- err
				}
				e, ok, err := s.Get(k)
				if err != nil {
					errs <- err
					continue
				}
				if !ok {
					errs <- errors.New("miss right after a Put of the same key")
					continue
				}
				if len(e.Stdout) != 64<<10 || !bytes.Equal(e.Stdout, bytes.Repeat(e.Stdout[:1], len(e.Stdout))) {
					errs <- errors.New("torn entry")
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, ok := mustGet(t, s, k); !ok {
		t.Fatal("entry invalid after concurrent writers")
	}
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			t.Errorf("temp file left behind: %s", de.Name())
		}
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Hits != workers*rounds+1 || st.Misses != 0 {
		t.Fatalf("Stats = %+v, want exactly %d hits and no misses", st, workers*rounds+1)
	}
}

func TestPermissionsDespiteUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	s, _ := newStore(t)
	k := keyOf("perm")
	mustPut(t, s, k, []byte("secret prompt answer"))
	mustGet(t, s, k)
	for path, want := range map[string]os.FileMode{
		s.Dir:                         0o700,
		filepath.Join(s.Dir, k):       0o600,
		filepath.Join(s.Dir, "stats"): 0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", filepath.Base(path), fi.Mode().Perm(), want)
		}
	}
}

func TestExistingLooseDirIsTightened(t *testing.T) {
	s, _ := newStore(t)
	if err := os.Mkdir(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, keyOf("x"), []byte("x"))
	fi, err := os.Stat(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestStatsCountsHitsMissesAndSavedSeconds(t *testing.T) {
	s, _ := newStore(t)
	if st, err := s.Stats(); err != nil || st != (promptcache.Stats{}) {
		t.Fatalf("Stats of a missing cache = %+v, %v; want zero, nil", st, err)
	}
	if exists(s.Dir) {
		t.Fatal("Stats created the cache dir")
	}
	out := []byte("twelve bytes")
	if err := s.Put(keyOf("a"), promptcache.Entry{Stdout: out, Seconds: 2.5}); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, keyOf("a"))
	mustGet(t, s, keyOf("a"))
	mustGet(t, s, keyOf("missing"))
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := promptcache.Stats{Entries: 1, Bytes: 68 + int64(len(out)), Hits: 2, Misses: 1, SavedSeconds: 5}
	if st != want {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
}

func TestClear(t *testing.T) {
	s, _ := newStore(t)
	if err := s.Clear(); err != nil {
		t.Fatalf("Clear of a missing cache: %v", err)
	}
	mustPut(t, s, keyOf("a"), []byte("a"))
	mustPut(t, s, keyOf("b"), []byte("b"))
	mustGet(t, s, keyOf("a"))
	mustGet(t, s, keyOf("c"))
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st != (promptcache.Stats{}) {
		t.Fatalf("Stats after Clear = %+v, want zero", st)
	}
	if _, ok := mustGet(t, s, keyOf("a")); ok {
		t.Fatal("hit after Clear")
	}
}

func TestBadInput(t *testing.T) {
	s, _ := newStore(t)
	for _, k := range []string{"", "../../etc/passwd", "stats", strings.ToUpper(keyOf("x"))} {
		if _, _, err := s.Get(k); !errors.Is(err, promptcache.ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", k, err)
		}
		if err := s.Put(k, promptcache.Entry{Stdout: []byte("x")}); !errors.Is(err, promptcache.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	var none promptcache.Store
	if _, _, err := none.Get(keyOf("x")); err == nil {
		t.Error("Get without Dir: want an error")
	}
	if err := none.Put(keyOf("x"), promptcache.Entry{Stdout: []byte("x")}); err == nil {
		t.Error("Put without Dir: want an error")
	}
}

func TestUnusableDirIsAnError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &promptcache.Store{Dir: file}
	if _, ok, err := s.Get(keyOf("x")); err == nil || ok {
		t.Fatalf("Get in a file = %v, %v; want a miss with an error", ok, err)
	}
	if err := s.Put(keyOf("x"), promptcache.Entry{Stdout: []byte("x")}); err == nil {
		t.Fatal("Put in a file: want an error")
	}
}

// A FIFO planted as an entry is never waited on: a miss, and removed.
func TestFIFOEntryIsAMiss(t *testing.T) {
	s, _ := newStore(t)
	k := keyOf("fifo")
	mustPut(t, s, keyOf("other"), []byte("x")) // makes the folder
	path := filepath.Join(s.Dir, k)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	guardtest.Within(t, "Get of a FIFO entry", func() {
		if _, ok := mustGet(t, s, k); ok {
			t.Error("a FIFO entry was a hit")
		}
	})
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the FIFO entry is still there: %v", err)
	}
}

// The counters file is guard's own: a link planted in its place is
// replaced, never followed (as root, following it would create or
// overwrite any file).
func TestStatsLinkIsNotFollowed(t *testing.T) {
	s, _ := newStore(t)
	mustPut(t, s, keyOf("a"), []byte("x"))
	target := filepath.Join(t.TempDir(), "created-by-guard")
	stats := filepath.Join(s.Dir, "stats")
	os.Remove(stats)
	if err := os.Symlink(target, stats); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, keyOf("a"))
	if _, err := os.Lstat(target); err == nil {
		t.Fatal("the counters followed a link: its target was created")
	}
	if fi, err := os.Lstat(stats); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the counters file is not a file of guard's own: %v %v", fi, err)
	}
	if st, err := s.Stats(); err != nil || st.Hits != 1 {
		t.Fatalf("Stats = %+v, %v; want the hit counted", st, err)
	}
}

// Stats reads the counters file without replacing anything: a FIFO, a
// folder or a link planted in its place holds no counters, so the figures
// are zero (the next count replaces a FIFO or a link), never an error and
// never a wait.
func TestStatsOfPlantedCountersFileAreZero(t *testing.T) {
	for name, plant := range map[string]func(string) error{
		"fifo":   func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"folder": func(p string) error { return os.Mkdir(p, 0o700) },
		"link":   func(p string) error { return os.Symlink(filepath.Join(filepath.Dir(p), "elsewhere"), p) },
	} {
		s, _ := newStore(t)
		mustPut(t, s, keyOf("a"), []byte("x"))
		stats := filepath.Join(s.Dir, "stats")
		os.Remove(stats)
		if err := plant(stats); err != nil {
			t.Fatal(err)
		}
		guardtest.Within(t, "Stats with a planted "+name, func() {
			st, err := s.Stats()
			if err != nil || st.Entries != 1 || st.Hits != 0 || st.Misses != 0 || st.SavedSeconds != 0 {
				t.Errorf("%s: Stats = %+v, %v; want the entry and zero counters", name, st, err)
			}
		})
	}
}
