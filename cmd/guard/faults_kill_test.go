package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch/ranged"
	"github.com/sandbox-guard/guard/guard/promptcache"
)

// The kill campaign: guard is SIGKILLed, with its whole session (what a
// sandbox does when it stops), at random moments of a model download, a
// CMake rebuild and a prompt-cache store. After each kill every final file
// must be absent or correct, no lock may be held, the heal log must have no
// torn line, and the same call run again must heal and answer.
//
// The normal suite runs a few kills per kind; GUARD_KILLS=50 runs fifty per
// kind (and the guard-only kills, at most five), and GUARD_KILL_SEED
// replays a campaign.

func killsPerKind(t *testing.T, def int) int {
	if v := os.Getenv("GUARD_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("GUARD_KILLS=%q: want a positive number", v)
		}
		return n
	}
	return def
}

func killRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("GUARD_KILL_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("GUARD_KILL_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// killRun is one call that was (or was meant to be) cut short.
type killRun struct {
	Killed    bool // the kill came before the call ended on its own
	Result    faultResult
	Survivors []guardtest.Proc // guard-only kills: what of the call outlived guard
}

// killAfter starts the call and, after d, SIGKILLs its whole session, or
// guard alone when guardOnly (the survivors are returned, still running).
func (e *faultEnv) killAfter(d time.Duration, guardOnly bool, name string, args ...string) killRun {
	e.t.Helper()
	cmd := e.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	sid := cmd.Process.Pid
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	var kr killRun
	select {
	case <-done:
	case <-time.After(d):
		kr.Killed = true
		if guardOnly {
			_ = syscall.Kill(sid, syscall.SIGKILL)
		} else {
			guardtest.KillSession(sid)
		}
		<-done
	}
	kr.Result = faultResult{Code: statusOf(cmd.ProcessState), Stdout: out.String(), Stderr: errb.String(), Elapsed: time.Since(start)}
	if guardOnly && kr.Killed {
		kr.Survivors = guardtest.SessionProcs(sid)
		return kr
	}
	if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.SessionProcs(sid) }, 3*time.Second); len(left) > 0 {
		guardtest.KillSession(sid)
		e.t.Errorf("after the kill, processes of the call are still alive: %s", guardtest.DescribeProcs(left))
	}
	if kr.Killed {
		e.killHeals()
	}
	return kr
}

// killHeals SIGKILLs the session of every heal a call left detached whose
// job lock is still held (its own session, its pid in its job record), as
// a sandbox that stops kills everything: each job's lock is then free. A
// record whose lock is free is a heal that ended: its pid may be another
// process's now, on a machine other tests share, and is left alone.
func (e *faultEnv) killHeals() {
	e.t.Helper()
	jobs := filepath.Join(e.StateDir, "jobs")
	deadline := time.Now().Add(5 * time.Second)
	for {
		held := 0
		names, _ := filepath.Glob(filepath.Join(jobs, "*.json"))
		for _, n := range names {
			lock := flock.New(strings.TrimSuffix(n, ".json") + ".lock")
			if ok, err := lock.TryLock(); ok || err != nil {
				_ = lock.Unlock()
				continue
			}
			held++
			var rec struct {
				PID int `json:"pid"`
			}
			if b, err := os.ReadFile(n); err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 0 {
				guardtest.KillSession(rec.PID)
			}
		}
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("the heals the killed call started still hold %d job locks", held)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// afterKill runs the checks every kind shares.
func (e *faultEnv) afterKill(t *testing.T) {
	t.Helper()
	checkLocksFree(t, e.StateDir)
	checkLocksFree(t, e.Home)
	checkLogLines(t, e.Log)
}

const killModelSize = 4 << 20

func TestKillDownload(t *testing.T) {
	t.Parallel()
	kills := killsPerKind(t, 6)
	rng := killRand(t)
	srv := newFaultModelServer(t, killModelSize, 4<<20) // about a second a body
	e := newFaultEnv(t, fmt.Sprintf(`
[budget]
heal = "2m"

[tools.llama-completion]
path = "$BIN/llama-completion"
cache = false

[[models]]
file = "m.gguf"
size = %d
sha256 = %q
urls = [%q]
`, killModelSize, srv.SHA256, srv.URL()))
	e.Tool("llama-completion", fakeModelReader)
	model := filepath.Join(e.Home, "models", "m.gguf")
	call := []string{"-m", model, "-p", "hi", "-n", "4"}
	want := fmt.Sprintf("model bytes: %d\n", killModelSize)

	var killed, absent, whole, partials, prefixOK int
	for i := range kills {
		if rng.IntN(3) == 0 {
			os.Remove(model + ".partial") // now and then start from nothing
		}
		kr := e.killAfter(time.Duration(rng.Int64N(int64(1500*time.Millisecond))), false, "llama-completion", call...)
		if kr.Killed {
			killed++
		}
		switch b, err := os.ReadFile(model); {
		case os.IsNotExist(err):
			absent++
		case err != nil:
			t.Fatal(err)
		case bytes.Equal(b, srv.Data):
			whole++
		default:
			t.Errorf("kill %d: %s holds %d bytes that are not the model", i, model, len(b))
		}
		if b, err := os.ReadFile(model + ".partial"); err == nil {
			partials++
			if len(b) <= len(srv.Data) && bytes.Equal(b, srv.Data[:len(b)]) {
				prefixOK++
			} else {
				t.Errorf("kill %d: the partial file (%d bytes) is not a prefix of the model", i, len(b))
			}
		}
		e.afterKill(t)
		r := e.Run("llama-completion", call...)
		if r.Code != 0 || r.Stdout != want {
			t.Errorf("kill %d: the next call did not heal: %s", i, r)
		}
		if b, _ := os.ReadFile(model); !bytes.Equal(b, srv.Data) {
			t.Errorf("kill %d: after the healing call the model is not the served file", i)
		}
		if i < kills-1 {
			os.Remove(model)
		}
	}
	t.Logf("download: %d kills (%d before the call ended); after the kill: model absent %d, whole %d; partial left %d (all a true prefix: %v); %d GETs, %d of them resumed with Range",
		kills, killed, absent, whole, partials, prefixOK == partials, srv.gets.Load(), srv.ranged.Load())
}

// killPartsModelSize spans three parts of a download in parts (4 MiB
// each at least).
const killPartsModelSize = 10 << 20

// TestKillDownloadInParts is TestKillDownload for a model fetched over
// several connections: after each kill the partial file holds every byte
// its record (MODEL.partial.parts) counts, and the call that heals never
// asks again for a byte the record counted.
func TestKillDownloadInParts(t *testing.T) {
	t.Parallel()
	kills := killsPerKind(t, 4)
	rng := killRand(t)
	srv := newFaultModelServer(t, killPartsModelSize, 6<<20) // about 0.7 s a part
	e := newFaultEnv(t, fmt.Sprintf(`
[budget]
heal = "2m"

[tools.llama-completion]
path = "$BIN/llama-completion"
cache = false

[[models]]
file = "m.gguf"
size = %d
sha256 = %q
urls = [%q]
connections = 3
`, killPartsModelSize, srv.SHA256, srv.URL()))
	e.Tool("llama-completion", fakeModelReader)
	model := filepath.Join(e.Home, "models", "m.gguf")
	call := []string{"-m", model, "-p", "hi", "-n", "4"}
	want := fmt.Sprintf("model bytes: %d\n", killPartsModelSize)

	var killed, recorded int
	for i := range kills {
		kr := e.killAfter(time.Duration(rng.Int64N(int64(1200*time.Millisecond))), false, "llama-completion", call...)
		if kr.Killed {
			killed++
		}
		switch b, err := os.ReadFile(model); {
		case os.IsNotExist(err):
		case err != nil:
			t.Fatal(err)
		case !bytes.Equal(b, srv.Data):
			t.Errorf("kill %d: %s holds %d bytes that are not the model", i, model, len(b))
		}
		e.afterKill(t)
		var rec ranged.Record
		if r, err := ranged.Load(model + ".partial.parts"); err == nil {
			rec = r
			recorded++
			disk, err := os.ReadFile(model + ".partial")
			if (err != nil || int64(len(disk)) != rec.Size) && rec.Bytes() > 0 {
				// Killed between the record and the preallocation, the
				// record counts nothing yet (the next run discards both);
				// after it, the file has the full size.
				t.Fatalf("kill %d: a record counting %d bytes beside a partial file of %d bytes (%v)", i, rec.Bytes(), len(disk), err)
			}
			for k, d := range rec.Done {
				s := int64(k) * rec.Part
				if !bytes.Equal(disk[s:s+d], srv.Data[s:s+d]) {
					t.Errorf("kill %d: the record counts %d bytes of part %d that the file does not hold", i, d, k)
				}
			}
		}
		before := len(srv.Asked())
		r := e.Run("llama-completion", call...)
		if r.Code != 0 || r.Stdout != want {
			t.Errorf("kill %d: the next call did not heal: %s", i, r)
		}
		if b, _ := os.ReadFile(model); !bytes.Equal(b, srv.Data) {
			t.Errorf("kill %d: after the healing call the model is not the served file", i)
		}
		for _, a := range srv.Asked()[before:] {
			var from, to int64
			if _, err := fmt.Sscanf(a, "bytes=%d-%d", &from, &to); err != nil || rec.Part == 0 {
				continue
			}
			k := from / rec.Part
			if k < int64(len(rec.Done)) && from < k*rec.Part+rec.Done[k] {
				t.Errorf("kill %d: the heal asked again for %s; the record had part %d up to byte %d", i, a, k, k*rec.Part+rec.Done[k])
			}
		}
		os.Remove(model)
	}
	// A last call from nothing, not killed: a download in parts over the
	// manifest's 3 connections, one request a part, and the heal log says
	// so.
	os.Remove(model + ".partial")
	os.Remove(model + ".partial.parts")
	before := len(srv.Asked())
	if r := e.Run("llama-completion", call...); r.Code != 0 || r.Stdout != want {
		t.Fatalf("the call from nothing did not heal: %s", r)
	}
	if asked := srv.Asked()[before:]; len(asked) != 3 || asked[0] != "bytes=0-4194303" {
		t.Errorf("the download from nothing asked for %q, want its 3 parts", asked)
	}
	// The heal log says how many connections each download used.
	logged, _ := os.ReadFile(e.Log)
	inParts := 0
	for line := range strings.Lines(string(logged)) {
		var ev struct {
			Event, Result string
			Connections   int
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "model.download" && ev.Result == "ok" && ev.Connections == 3 {
			inParts++
		}
	}
	if inParts == 0 {
		t.Errorf("no model.download event in the heal log says connections 3:\n%s", logged)
	}
	t.Logf("download in parts: %d kills (%d before the call ended), %d left a record; %d GETs",
		kills, killed, recorded, srv.gets.Load())
}

// fakeModelReader is a llama tool that reads the whole model it is given.
const fakeModelReader = `m=; prev=
for a in "$@"; do [ "$prev" = -m ] && m=$a; prev=$a; done
echo "model bytes: $(wc -c < "$m")"
`

// cacheHits is the prompt cache's own count of hits (a hit is not logged).
func cacheHits(t *testing.T, store *promptcache.Store) int64 {
	t.Helper()
	st, err := store.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st.Hits
}

func TestKillCacheStore(t *testing.T) {
	t.Parallel()
	kills := killsPerKind(t, 6)
	rng := killRand(t)
	e := newFaultEnv(t, `
[tools.llama-completion]
path = "$BIN/llama-completion"

[[models]]
file = "m.gguf"
size = 4096
`)
	// Deterministic, in three pieces, so a kill can land mid-answer and
	// before or after the store.
	e.Tool("llama-completion", `p=; prev=
for a in "$@"; do [ "$prev" = -p ] && p=$a; prev=$a; done
echo "answer to $p, part 1"
sleep 0.03
echo "part 2"
sleep 0.03
echo "part 3 of $p"
`)
	model := filepath.Join(e.Home, "m.gguf")
	guardtest.WriteGGUF(t, model, 4096)
	call := func(p string) []string { return []string{"-m", model, "-p", p, "-n", "8"} }
	want := func(p string) string { return fmt.Sprintf("answer to %s, part 1\npart 2\npart 3 of %s\n", p, p) }

	// Plain calls set the range of kill moments (the first one also hashes
	// and stamps the model).
	var span time.Duration
	for _, p := range []string{"warm-up", "warm-up 2"} {
		r := e.Run("llama-completion", call(p)...)
		if r.Code != 0 || r.Stdout != want(p) {
			t.Fatalf("warm-up call: %s", r)
		}
		span = r.Elapsed * 11 / 10
	}
	store := &promptcache.Store{Dir: filepath.Join(e.StateDir, "prompts")}
	hexKey := regexp.MustCompile(`^[0-9a-f]{64}$`)

	var killed, stored, hits int
	for i := range kills {
		p := fmt.Sprintf("question %d/%x", i, rng.Uint32())
		kr := e.killAfter(time.Duration(rng.Int64N(int64(span))), false, "llama-completion", call(p)...)
		if kr.Killed {
			killed++
		} else if kr.Result.Stdout != want(p) {
			t.Errorf("kill %d: the call ended before the kill with wrong output: %s", i, kr.Result)
		}
		e.afterKill(t)
		// Every entry on disk is whole: a Get of each finds it.
		ents, _ := os.ReadDir(store.Dir)
		for _, ent := range ents {
			if !hexKey.MatchString(ent.Name()) {
				continue
			}
			if _, ok, err := store.Get(ent.Name()); !ok {
				t.Errorf("kill %d: cache entry %s does not read back (err %v)", i, ent.Name(), err)
			}
		}
		before := len(logEvents(t, e.Log, "cache.store"))
		r := e.Run("llama-completion", call(p)...)
		if r.Code != 0 || r.Stdout != want(p) {
			t.Errorf("kill %d: the next call did not answer: %s", i, r)
		}
		if len(logEvents(t, e.Log, "cache.store")) > before {
			stored++ // the killed call had not stored it
		}
		hitsBefore := cacheHits(t, store)
		r = e.Run("llama-completion", call(p)...)
		if r.Code != 0 || r.Stdout != want(p) {
			t.Errorf("kill %d: the cached answer differs from the fresh one: %s", i, r)
		}
		if cacheHits(t, store) == hitsBefore+1 {
			hits++
		} else {
			t.Errorf("kill %d: the third identical call was not a cache hit", i)
		}
	}
	var tmp int
	ents, _ := os.ReadDir(store.Dir)
	for _, ent := range ents {
		if strings.HasPrefix(ent.Name(), ".tmp-") {
			tmp++
		}
	}
	t.Logf("cache: %d kills (%d before the call ended); the killed call had not stored in %d; replay equal to the fresh answer %d/%d; temp files left by killed stores %d",
		kills, killed, stored, hits, kills, tmp)
}

// buildManifest rebuilds llama-simple from the CMake fixture; count-build
// records each run of the recipe.
const buildManifest = `
[budget]
heal = "5m"

[builds.llama-cpp]
dir = "~/llama.cpp"
steps = [
  ["$BIN/count-build"],
  ["cmake", "-B", "build", "-DCMAKE_BUILD_TYPE=Release"],
  ["cmake", "--build", "build", "-j2"],
]

[tools.llama-simple]
path = "~/llama.cpp/build/bin/llama-simple"
build = "llama-cpp"
cache = false

[[models]]
file = "m.gguf"
size = 64
`

func newBuildEnv(t *testing.T, manifest string) *faultEnv {
	t.Helper()
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Skip("cmake is not installed")
	}
	e := newFaultEnv(t, manifest)
	e.Tool("count-build", `echo build >> "$DIR/builds"`)
	if err := os.CopyFS(filepath.Join(e.Home, "llama.cpp"), os.DirFS(filepath.Join(repoRoot(), "testdata", "cmake-fixture"))); err != nil {
		t.Fatal(err)
	}
	guardtest.WriteGGUF(t, filepath.Join(e.Home, "m.gguf"), 64)
	return e
}

// binState runs the built binary itself: "absent", "ok" or why it fails.
func binState(path string) string {
	if _, err := os.Lstat(path); os.IsNotExist(err) {
		return "absent"
	}
	out, err := exec.Command(path, "probe").CombinedOutput()
	if err == nil && strings.Contains(string(out), "arg: probe") {
		return "ok"
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "libfixture.so")); os.IsNotExist(err) {
		return "library still evicted"
	}
	return fmt.Sprintf("broken (%v)", err)
}

func TestKillBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("cold CMake builds")
	}
	kills := killsPerKind(t, 3)
	rng := killRand(t)
	e := newBuildEnv(t, buildManifest)
	model := filepath.Join(e.Home, "m.gguf")
	bin := filepath.Join(e.Home, "llama.cpp", "build", "bin", "llama-simple")
	build := filepath.Join(e.Home, "llama.cpp", "build")

	r := e.Run("llama-simple", "-m", model, "cold")
	if r.Code != 0 || !strings.Contains(r.Stdout, "arg: cold") {
		t.Fatalf("cold build: %s", r)
	}
	cold := r.Elapsed
	t.Logf("cold build and call: %s", cold.Round(time.Millisecond))

	// What each kill evicts first, and the span its kill moment is drawn
	// from: the whole build folder (configure, compile, link), the output
	// folder (relink), the shared library alone.
	evictions := []struct {
		name string
		do   func() error
		span time.Duration
	}{
		{"build folder", func() error { return os.RemoveAll(build) }, cold * 11 / 10},
		{"build/bin", func() error { return os.RemoveAll(filepath.Dir(bin)) }, cold / 2},
		{"libfixture.so", func() error { return os.Remove(filepath.Join(filepath.Dir(bin), "libfixture.so")) }, cold / 3},
	}
	states := map[string]int{}
	var killed, healed int
	for i := range kills {
		ev := evictions[i%len(evictions)]
		if err := ev.do(); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		kr := e.killAfter(time.Duration(rng.Int64N(int64(ev.span))), false, "llama-simple", "-m", model, "killed")
		if kr.Killed {
			killed++
		}
		st := binState(bin)
		states[st]++
		e.afterKill(t)
		r := e.Run("llama-simple", "-m", model, "again")
		if r.Code == 0 && strings.Contains(r.Stdout, "arg: again") {
			healed++
			continue
		}
		t.Errorf("kill %d (%s evicted, binary %s after the kill): the next call did not heal: %s\nbuild log tail:\n%s",
			i, ev.name, st, r, tail(filepath.Join(e.StateDir, "builds", "llama-cpp.log"), 20))
		// From a clean build folder the recipe must work again.
		if err := os.RemoveAll(build); err != nil {
			t.Fatal(err)
		}
		if r := e.Run("llama-simple", "-m", model, "clean"); r.Code != 0 || !strings.Contains(r.Stdout, "arg: clean") {
			t.Fatalf("kill %d: even a clean build folder did not heal: %s", i, r)
		}
	}
	t.Logf("build: %d kills (%d before the call ended); binary after the kill: %s; next call healed %d/%d; recipe runs %d",
		kills, killed, fmtCounts(states), healed, kills, countLines(filepath.Join(e.Dir, "builds")))
}

// TestKillGuardOnly kills guard alone, not its session, in the middle of a
// rebuild and of a tool run, and records what outlives it: the build step
// runs in a process group of its own and goes on, holding the build lock;
// the tool is ended by its lifeline. The call right after must still work,
// and nothing may be left once the build finishes.
func TestKillGuardOnly(t *testing.T) {
	if os.Getenv("GUARD_KILLS") == "" {
		t.Skip("a measurement more than a check: run with GUARD_KILLS=N")
	}
	kills := killsPerKind(t, 1)
	if kills > 5 {
		kills = 5 // each one is a cold build
	}
	rng := killRand(t)
	e := newBuildEnv(t, buildManifest)
	model := filepath.Join(e.Home, "m.gguf")
	build := filepath.Join(e.Home, "llama.cpp", "build")
	survivors := map[string]int{}
	var nextOK, orphansDone int
	for i := range kills {
		if err := os.RemoveAll(build); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(e.Dir, "builds"))
		// Kill once the build has started: a compiler or cmake is running.
		cmd := e.Command("llama-simple", "-m", model, "orphaned")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sid := cmd.Process.Pid
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		deadline := time.Now().Add(30 * time.Second)
		for !hasComm(guardtest.SessionProcs(sid), "cmake", "make", "gmake", "cc", "cc1") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
		_ = syscall.Kill(sid, syscall.SIGKILL)
		<-done
		left := guardtest.SessionProcs(sid)
		for _, p := range left {
			survivors[p.Comm]++
		}
		// The next call waits for the orphaned build: its steps still hold the
		// build lock through the file they were handed, then it heals.
		r := e.Run("llama-simple", "-m", model, "next")
		if r.Code == 0 && strings.Contains(r.Stdout, "arg: next") {
			nextOK++
		} else {
			t.Errorf("guard-only kill %d (survivors %s): the next call failed: %s", i, guardtest.DescribeProcs(left), r)
		}
		if rest := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.SessionProcs(sid) }, 2*time.Minute); len(rest) == 0 {
			orphansDone++
		} else {
			guardtest.KillSession(sid)
			t.Errorf("guard-only kill %d: the orphaned build did not end: %s", i, guardtest.DescribeProcs(rest))
		}
		e.afterKill(t)
		t.Logf("guard-only kill %d: survivors %s; recipe runs so far %d", i, guardtest.DescribeProcs(left), countLines(filepath.Join(e.Dir, "builds")))
	}
	t.Logf("guard-only (build): %d kills; survivors by name %s; next call ok %d/%d; orphans ended on their own %d",
		kills, fmtCounts(survivors), nextOK, kills, orphansDone)

	// A tool that hangs, guard killed alone: its lifeline ends the tool
	// (TestKillGuardEndsTool checks every way of killing guard).
	e.Tool("hang-tool", `echo started; exec sleep 30`)
	e.WriteManifest(buildManifest + "\n[tools.hang-tool]\ntimeout = \"60s\"\n")
	e.LinkShims()
	kr := e.killAfter(500*time.Millisecond, true, "hang-tool")
	sid := -1
	if len(kr.Survivors) > 0 {
		sid = kr.Survivors[0].SID
	}
	left := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.SessionProcs(sid) }, 10*time.Second)
	t.Logf("guard-only (supervised tool): %d processes of the call right after the kill, %d a moment later", len(kr.Survivors), len(left))
	for _, p := range left {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
		t.Errorf("guard-only (supervised tool): %s outlived guard", p)
	}
}

func hasComm(ps []guardtest.Proc, names ...string) bool {
	for _, p := range ps {
		for _, n := range names {
			if p.Comm == n {
				return true
			}
		}
	}
	return false
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestKillGuardEndsTool kills guard the ways an agent's harness does on a
// timeout while it supervises a tool: guard's pid alone (Python's
// subprocess.run(timeout=)), and the process group guard was started in
// (`setsid bash -c 'exec ~/.shim/tool'`, then kill -9 -- -PGID). Either
// way nothing of the tool may outlive guard: not a single exec'd process,
// not a sh and the sleep it started. The tool's processes are found by a
// marker in their environment, which every one of them inherits; the
// lifeline that ended them must be gone too. Each way is one kill a run,
// GUARD_KILLS=N of them.
//
// The kill comes as soon as guard has armed the lifeline, the earliest
// the lifeline covers (docs/process-lifetime.md: a child the tool starts
// in the instant between its exec and the arm is not covered). The tool
// starts nothing before it has read a line from its stdin, which guard
// copies there (prompts = "answer" gives the tool a pipe guard writes
// to) only once the tool's fork has returned and the arm is written:
// timing-free, where a tool that started at once was killed inside that
// instant on a loaded machine. It writes its pid, which sets off the
// kill, after its last write to stdout: prompts = "answer" pipes its
// output through guard, and a write after guard died would end the sh by
// SIGPIPE, before it starts the rest of its tree, instead of the lifeline.
func TestKillGuardEndsTool(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, `
[tools.slowtree]
timeout = "60s"
prompts = "answer"

[tools.slowone]
timeout = "60s"
prompts = "answer"
`)
	e.Tool("slowtree", `read -r _
sleep 1000 &
echo started
echo $$ > "$DIR/$MARK.pid"
sleep 1000
`)
	e.Tool("slowone", `read -r _
echo started
echo $$ > "$DIR/$MARK.pid"
exec sleep 1000
`)
	kills := killsPerKind(t, 1)
	for _, tool := range []string{"slowtree", "slowone"} {
		for _, group := range []bool{false, true} {
			name := tool + "/guard-alone"
			if group {
				name = tool + "/callers-group"
			}
			t.Run(name, func(t *testing.T) {
				var slowest time.Duration
				for i := range kills {
					if took := e.killGuardMidTool(t, tool, fmt.Sprintf("%s-%d", strings.ReplaceAll(name, "/", "-"), i), group); took > slowest {
						slowest = took
					}
				}
				t.Logf("%s: %d kills, nothing of the tool left after any; the slowest group was gone %s after the kill", name, kills, slowest.Round(time.Millisecond))
			})
		}
	}
	// A call that ends on its own dismisses its lifeline.
	mark := fmt.Sprintf("MARK=kill-%d-normal", os.Getpid())
	e.Tool("quick", `echo $$ > "$DIR/$MARK.pid"; echo done`)
	e.WriteManifest("[tools.quick]\ntimeout = \"60s\"\n")
	e.LinkShims()
	quick := e.With(mark).Command("quick")
	if out, err := quick.Output(); err != nil || string(out) != "done\n" {
		t.Fatalf("quick: %v %q", err, out)
	}
	if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return lifelines(quick.Process.Pid) }, 10*time.Second); len(left) > 0 {
		t.Errorf("the lifeline of a call that ended on its own is still running: %s", guardtest.DescribeProcs(left))
	}
}

// killGuardMidTool calls tool, SIGKILLs guard (or its whole group) once the
// tool has started, and fails unless every process carrying the call's
// marker, and the lifeline, is gone; it returns how long they took.
func (e *faultEnv) killGuardMidTool(t *testing.T, tool, id string, group bool) time.Duration {
	t.Helper()
	mark := fmt.Sprintf("MARK=kill-%d-%s", os.Getpid(), id)
	t.Cleanup(func() {
		for _, p := range guardtest.EnvProcs(mark) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	})
	cmd := e.With(mark).Command(tool)
	cmd.Stdin = strings.NewReader("go\n") // see TestKillGuardEndsTool
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	pgid := waitPIDFile(t, filepath.Join(e.Dir, strings.TrimPrefix(mark, "MARK=")+".pid"), 10*time.Second)
	if group {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	} else {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	}
	killed := time.Now()
	<-done
	if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.EnvProcs(mark) }, 10*time.Second); len(left) > 0 {
		t.Fatalf("guard was SIGKILLed, and the tool's processes live on: %s", guardtest.DescribeProcs(left))
	}
	took := time.Since(killed)
	if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return lifelines(cmd.Process.Pid) }, 10*time.Second); len(left) > 0 {
		t.Errorf("the lifeline of group %d outlived its job: %s", pgid, guardtest.DescribeProcs(left))
	}
	return took
}

// waitPIDFile waits for a tool to write its pid into path.
func waitPIDFile(t *testing.T, path string, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool did not write %s within %s", path, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lifelines lists the live lifelines the guard of pid started (their argv
// ends in guard-lifeline PID).
func lifelines(pid int) []guardtest.Proc {
	want := []byte("\x00guard-lifeline\x00" + strconv.Itoa(pid) + "\x00")
	return guardtest.ProcsWhose("cmdline", func(b []byte) bool { return bytes.HasSuffix(b, want) })
}
