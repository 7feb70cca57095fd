package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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
)

// One build per fleet (docs/fleet-lease.md), end to end: sandboxes (each
// its own HOME, shims, state and heal log) with the same checkout of the
// CMake fixture, none built, all naming one real distribution registry
// (in-process) in stash_to and stash_from and trusting the fleet's key,
// call the tool at once. The build step is slowed (a cmake wrapper that
// sleeps) so that it outlasts every start.
//
// GUARD_FLEET_ROUNDS=N repeats the 8-sandbox round N times with a 20 s
// build step and prints how many builds each round made and how long each
// sandbox answered after the entry's push: the measurement
// (docs/BENCHMARKS.md), too long for the suite.

// fleet is a registry and the sandboxes that share it.
type fleet struct {
	t     *testing.T
	dir   string
	reg   *guardtest.Registry
	boxes []*faultEnv
	runs  string // one line a cmake --build run: the sandbox's HOME
}

// newFleet sets up n sandboxes whose build step sleeps slow; with clone
// none has the sources yet, and the recipe clones them (a fresh fleet).
func newFleet(t *testing.T, n int, slow time.Duration, leasePeriod string, clone bool) *fleet {
	t.Helper()
	for _, tool := range []string{"cmake", "cc", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the fixture is built with CMake from a git checkout", tool)
		}
	}
	dir := t.TempDir()
	reg, err := guardtest.NewRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	f := &fleet{t: t, dir: dir, reg: reg, runs: filepath.Join(dir, "cmake-runs")}

	// One revision of the sources, cloned by every sandbox.
	src := filepath.Join(dir, "src")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(repoRoot(), "testdata", "cmake-fixture"))); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "one"}} {
		if out, err := exec.Command("git", append([]string{"-C", src}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", args, err, out)
		}
	}

	var pub string
	var sec []byte
	for i := range n {
		e := newFaultEnv(t, "")
		if !clone {
			if out, err := exec.Command("git", "clone", "-q", src, filepath.Join(e.Home, "llama.cpp")).CombinedOutput(); err != nil {
				t.Fatalf("git clone: %v\n%s", err, out)
			}
		}
		if err := reg.DockerLogin(e.Home); err != nil {
			t.Fatal(err)
		}
		keyDir := filepath.Join(e.Home, ".config", "guard")
		if i == 0 {
			r := e.RunPath(e.Guard, "stash", "keygen", "fleet-1")
			if r.Code != 0 {
				t.Fatalf("keygen: %s", r)
			}
			p, err := os.ReadFile(filepath.Join(keyDir, "stash.pub"))
			if err != nil {
				t.Fatal(err)
			}
			pub = strings.TrimSpace(string(p))
			if sec, err = os.ReadFile(filepath.Join(keyDir, "stash.sec")); err != nil {
				t.Fatal(err)
			}
		} else {
			// The fleet's one signing key, as each sandbox's image has it.
			if err := os.MkdirAll(keyDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(keyDir, "stash.sec"), sec, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// Each cmake run adds its CPU time (its children's, as times
		// says) to cpu: what building cost the fleet.
		e.Tool("cmake", fmt.Sprintf(`case "$1" in --build) echo "$HOME" >> %s; sleep %d;; esac
%s "$@"
rc=$?
times >> %s
exit $rc
`, f.runs, int(slow.Seconds()), mustLook(t, "cmake"), filepath.Join(dir, "cpu")))
		m := fleetManifest(reg.Host, pub, leasePeriod)
		if clone {
			m = strings.Replace(m, "dir = ", fmt.Sprintf("repo = %q\ndir = ", "file://"+src), 1)
		}
		if os.Getenv("GUARD_FLEET_NOLEASE") != "" {
			// The measurement's baseline: stash_to alone, no lease.
			m = strings.Replace(m, "stash_from = ", "# stash_from = ", 1)
		}
		e.WriteManifest(m)
		e.LinkShims()
		f.boxes = append(f.boxes, e)
	}
	t.Cleanup(func() { f.sweep() })
	return f
}

func mustLook(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fleetManifest(host, pub, period string) string {
	return fmt.Sprintf(`
[registry]
plain_http = [%[1]q]

[stash]
trusted_keys = [%[2]q]
lease = %[3]q

[builds.fixture]
dir = "$HOME/llama.cpp"
steps = [
  ["cmake", "-B", "build", "-DCMAKE_BUILD_TYPE=Release"],
  ["cmake", "--build", "build", "-j2"],
]
stash_to = "oci://%[1]s/fleet/stash"
stash_from = ["oci://%[1]s/fleet/stash"]

[tools.fixture]
path = "$HOME/llama.cpp/build/bin/llama-simple"
build = "fixture"
cache = false
`, host, pub, period)
}

// answer is one sandbox's call.
type answer struct {
	box int
	faultResult
	at time.Time // when it answered
}

// callAll calls the fixture in every sandbox at once (as far as two cores
// start eight processes at once) and returns their answers.
func (f *fleet) callAll(arg string) []answer {
	out := make([]answer, len(f.boxes))
	var wg sync.WaitGroup
	for i, e := range f.boxes {
		wg.Go(func() {
			r := e.Run("fixture", arg)
			out[i] = answer{box: i, faultResult: r, at: time.Now()}
		})
	}
	wg.Wait()
	return out
}

// builds is how many cmake --build steps the fleet ran.
func (f *fleet) builds() int {
	b, err := os.ReadFile(f.runs)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// cpu is the CPU-seconds the fleet's cmake runs took (user and system).
func (f *fleet) cpu() float64 {
	b, _ := os.ReadFile(filepath.Join(f.dir, "cpu"))
	total := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		for _, field := range strings.Fields(line) { // "0m1.234s 0m0.120s"
			m, s, ok := strings.Cut(strings.TrimSuffix(field, "s"), "m")
			mins, err1 := strconv.ParseFloat(m, 64)
			secs, err2 := strconv.ParseFloat(s, 64)
			if ok && err1 == nil && err2 == nil {
				total += mins*60 + secs
			}
		}
	}
	return total
}

// fleetProcs lists the live processes of the fleet's sandboxes (their
// environment names its folder): detached heals, pushes, build steps.
func (f *fleet) fleetProcs() []guardtest.Proc {
	want := []byte("GUARD_STATE_DIR=" + f.dir)
	return guardtest.ProcsWhose("environ", func(b []byte) bool { return bytes.Contains(b, want) })
}

// sweep waits for the fleet's background work (pushes) to end, then
// kills what is left and says so.
func (f *fleet) sweep() {
	left := guardtest.WaitProcsGone(f.fleetProcs, 60*time.Second)
	for _, p := range left {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	if len(left) > 0 {
		f.t.Errorf("the fleet left %d processes running: %s", len(left), guardtest.DescribeProcs(left))
	}
}

// checkAnswers fails for a sandbox that did not answer as the tool does.
func checkAnswers(t *testing.T, answers []answer, arg string) {
	t.Helper()
	for _, a := range answers {
		if a.Code != 0 || !strings.Contains(a.Stdout, "arg: "+arg+"\n") {
			t.Errorf("sandbox %d: %s", a.box, a.faultResult)
		}
		assertNoCrash(t, fmt.Sprintf("sandbox %d", a.box), a.faultResult)
	}
}

// leaseEvents counts each sandbox's fleet.lease events by result.
func (f *fleet) leaseEvents() map[string]int {
	n := map[string]int{}
	for _, e := range f.boxes {
		for _, ev := range logEvents(f.t, e.Log, "fleet.lease") {
			k := fmt.Sprint(ev["result"])
			if k == "released" {
				k += " " + fmt.Sprint(ev["reason"])
			}
			n[k]++
		}
	}
	return n
}

// Eight fresh sandboxes at once (the recipe clones the sources): one
// builds, the seven others wait on its lease and restore its entry; the
// heal logs say who took, waited and released it as published.
func TestFleetBuildsOnce(t *testing.T) {
	t.Parallel()
	rounds, _ := strconv.Atoi(os.Getenv("GUARD_FLEET_ROUNDS"))
	slow := 6 * time.Second
	if rounds > 0 {
		slow = 20 * time.Second
	}
	for round := range max(rounds, 1) {
		f := newFleet(t, 8, slow, "3s", rounds == 0)
		answers := f.callAll("hello")
		checkAnswers(t, answers, "hello")
		for _, a := range answers[:2] {
			t.Logf("sandbox %d: %s", a.box, a.faultResult)
		}
		builds := f.builds()
		if os.Getenv("GUARD_FLEET_NOLEASE") != "" {
			fmt.Fprintf(os.Stderr, "fleet round %d without the lease: %d builds, %.1f CPU-seconds of building\n", round, builds, f.cpu())
			continue
		}
		if builds < 1 || builds > 2 {
			t.Errorf("round %d: %d builds between 8 sandboxes, want 1 (2 at most, a rare race)", round, builds)
		}
		// The entry's push: the holder's push log says when.
		first, last := answers[0].at, answers[0].at
		for _, a := range answers {
			first, last = minTime(first, a.at), maxTime(last, a.at)
		}
		if rounds > 0 {
			fmt.Fprintf(os.Stderr, "fleet round %d: %d build(s), %.1f CPU-seconds of building; the last answer %s after the first\n", round, builds, f.cpu(), last.Sub(first).Round(100*time.Millisecond))
		}
		f.sweep()
		ev := f.leaseEvents()
		if builds == 1 && (ev["taken"] != 1 || ev["waited"] < 1 || ev["released published"] != 1) {
			t.Errorf("round %d: lease events %v, want one taken, some waited, one released as published", round, ev)
		}
		restored := 0
		for _, e := range f.boxes {
			for _, r := range logEvents(t, e.Log, "binary.restore") {
				if strings.Contains(fmt.Sprint(r["reason"]), "built by ") {
					restored++
				}
			}
		}
		if restored < 1 {
			t.Errorf("round %d: no sandbox restored the fleet's entry after waiting on the lease", round)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitTaken waits until a sandbox logs that it took the lease, and
// returns it and the pid of its detached heal, which holds the lease.
func (f *fleet) waitTaken() (int, int) {
	f.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		for i, e := range f.boxes {
			if len(logEvents(f.t, e.Log, "fleet.lease")) == 0 {
				continue
			}
			for _, ev := range logEvents(f.t, e.Log, "fleet.lease") {
				if ev["result"] != "taken" {
					continue
				}
				var rec struct {
					PID int `json:"pid"`
				}
				b, err := os.ReadFile(filepath.Join(e.StateDir, "jobs", "build-fixture.json"))
				if err == nil && json.Unmarshal(b, &rec) == nil && rec.PID > 0 {
					return i, rec.PID
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatal("no sandbox took the lease within 2 minutes")
	return 0, 0
}

// The sandbox that builds is SIGKILLed mid-build (its detached heal and
// its build step: the whole session, as a sandbox dies): its lease goes
// unrenewed, another sandbox takes it over and builds, and every sandbox
// answers, the killed one's next heal included.
func TestFleetLeaseTakenOverAfterSIGKILL(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 4, 8*time.Second, "3s", false)
	done := make(chan []answer)
	go func() { done <- f.callAll("again") }()
	box, pid := f.waitTaken()
	// Mid-build: once its build step runs (the cmake wrapper counted it).
	for deadline := time.Now().Add(2 * time.Minute); f.builds() < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the holder's build step did not start within 2 minutes")
		}
	}
	killed := time.Now()
	guardtest.KillSession(pid)
	answers := <-done
	checkAnswers(t, answers, "again")
	builds := f.builds()
	if builds < 2 || builds > 3 {
		t.Errorf("%d builds, want the killed one and one more (a third at most, a rare race)", builds)
	}
	f.sweep()
	// One takeover, of the killed holder's lease. A second, of the new
	// holder's, is the rare race a lease settled by reading back allows
	// (and the third build above): on a loaded machine a renewal or a
	// look can come later than its period.
	type takeover struct {
		box    int
		reason string
		ts     time.Time
	}
	var overs []takeover
	for i, e := range f.boxes {
		for _, ev := range logEvents(t, e.Log, "fleet.lease") {
			if ev["result"] == "taken over" {
				ts, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["ts"]))
				overs = append(overs, takeover{i, fmt.Sprint(ev["reason"]), ts})
			}
		}
	}
	slices.SortFunc(overs, func(a, b takeover) int { return a.ts.Compare(b.ts) })
	if len(overs) < 1 || len(overs) > 2 {
		t.Fatalf("%d takeovers, want 1 (2 at most, a rare race): %v", len(overs), overs)
	}
	// Any sandbox may take it over: the killed one's call starts its heal
	// again, which waits on the lease like the others.
	if first := overs[0]; !strings.Contains(first.reason, "(pid "+strconv.Itoa(pid)+")") {
		t.Errorf("sandbox %d took the lease over %s; the killed holder was sandbox %d, pid %d", first.box, first.reason, box, pid)
	}
	t.Logf("taken over %s after the kill (the lease's period: 3s); %d takeovers", overs[0].ts.Sub(killed).Round(100*time.Millisecond), len(overs))
}

// The registry stops while a sandbox holds the lease: nobody hangs on it,
// each builds on its own and answers, and the heal logs say why.
func TestFleetLeaseRegistryStopped(t *testing.T) {
	t.Parallel()
	f := newFleet(t, 3, 5*time.Second, "3s", false)
	done := make(chan []answer)
	go func() { done <- f.callAll("down") }()
	f.waitTaken()
	time.Sleep(time.Second)
	f.reg.Close()
	answers := <-done
	checkAnswers(t, answers, "down")
	if n := f.builds(); n != 3 {
		t.Errorf("%d builds with the registry stopped, want each of the 3 sandboxes to build", n)
	}
	f.sweep()
	for _, a := range answers {
		t.Logf("sandbox %d: %s", a.box, a.faultResult)
	}
}

// throttled is a model's own source that sends it slowly (64 KiB every
// 100 ms), with Range, and counts the bytes it sent.
type throttled struct {
	data []byte
	sent atomic.Int64
}

func (s *throttled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.ServeContent(w, r, "m.gguf", time.Time{}, &slowReader{s: s, r: bytes.NewReader(s.data)})
}

type slowReader struct {
	s *throttled
	r *bytes.Reader
}

func (s *slowReader) Read(p []byte) (int, error) {
	time.Sleep(100 * time.Millisecond)
	n, err := s.r.Read(p[:min(len(p), 64<<10)])
	s.s.sent.Add(int64(n))
	return n, err
}

func (s *slowReader) Seek(off int64, whence int) (int64, error) { return s.r.Seek(off, whence) }

// newModelFleet is n sandboxes whose manifest has one model of size bytes
// whose own source is slow (throttled), with push_to naming the
// registry tag that is also its first url (none with noLease).
func newModelFleet(t *testing.T, n, size int, noLease bool) (*fleet, *throttled) {
	t.Helper()
	src := &throttled{data: guardtest.GGUF(size)}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	f := &fleet{t: t, dir: t.TempDir()}
	reg, err := guardtest.NewRegistry(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	f.reg = reg
	tag := "oci://" + reg.Host + "/fleet/models:m"
	pushTo := "push_to = " + strconv.Quote(tag)
	if noLease {
		pushTo = ""
	}
	for range n {
		e := newFaultEnv(t, fmt.Sprintf(`
[registry]
plain_http = [%q]

[stash]
lease = "3s"

[[models]]
file = "m.gguf"
size = %d
sha256 = %q
urls = [%q, %q]
%s
connections = 1
`, reg.Host, size, guardtest.Sum(src.data), tag, srv.URL+"/m.gguf", pushTo))
		if err := reg.DockerLogin(e.Home); err != nil {
			t.Fatal(err)
		}
		f.boxes = append(f.boxes, e)
	}
	t.Cleanup(f.sweep)
	return f, src
}

// checkModel fails unless sandbox i's model is whole.
func (f *fleet) checkModel(i int, data []byte, r faultResult) {
	f.t.Helper()
	assertNoCrash(f.t, fmt.Sprintf("sandbox %d", i), r)
	got, err := os.ReadFile(filepath.Join(f.boxes[i].Home, "m.gguf"))
	if r.Code != 0 || err != nil || !bytes.Equal(got, data) {
		f.t.Errorf("sandbox %d: the model is not whole (%v): %s", i, err, r)
	}
}

// Eight sandboxes heal one model at once, its own source slow (about 3 s
// for its 2 MiB), push_to naming the registry tag that is also its first
// url: one sandbox downloads from the source and pushes it; the others
// wait on its lease and download it from the registry.
// GUARD_FLEET_NOLEASE=1 measures the same without push_to.
func TestFleetDownloadsAModelOnce(t *testing.T) {
	t.Parallel()
	const size = 2 << 20
	noLease := os.Getenv("GUARD_FLEET_NOLEASE") != ""
	f, src := newModelFleet(t, 8, size, noLease)
	data := src.data
	results := make([]faultResult, len(f.boxes))
	var wg sync.WaitGroup
	for i, e := range f.boxes {
		wg.Go(func() { results[i] = e.RunPath(e.Guard, "heal", "m.gguf") })
	}
	wg.Wait()
	for i, r := range results {
		f.checkModel(i, data, r)
	}
	t.Logf("a waiter: %s", results[1])
	f.sweep()
	if noLease {
		fmt.Fprintf(os.Stderr, "without the lease: the model's own source sent %d bytes to 8 sandboxes (the model is %d)\n", src.sent.Load(), size)
		return
	}
	if sent := src.sent.Load(); sent > 2*size {
		t.Errorf("the model's own source sent %d bytes to 8 sandboxes: more than 2 downloads of %d", sent, size)
	} else {
		t.Logf("with the lease: the model's own source sent %d bytes to 8 sandboxes (the model is %d)", sent, size)
	}
	ev := f.leaseEvents()
	if src.sent.Load() <= size && (ev["taken"] != 1 || ev["waited"] < 1 || ev["released published"] != 1) {
		t.Errorf("lease events %v, want one taken, some waited, one released as published", ev)
	}
}

// The sandbox that downloads the model for the fleet is SIGKILLed mid-way
// (its whole session): another takes the lease over and downloads it, and
// every other sandbox gets the whole model; the killed one's next heal
// takes it from the registry.
func TestFleetModelLeaseTakenOverAfterSIGKILL(t *testing.T) {
	t.Parallel()
	const size = 6 << 20 // about 10 s from the slow source
	f, src := newModelFleet(t, 4, size, false)
	cmds := make([]*exec.Cmd, len(f.boxes))
	out := make([]bytes.Buffer, len(f.boxes))
	for i, e := range f.boxes {
		cmds[i] = e.Command(e.Guard, "heal", "m.gguf")
		cmds[i].Stderr = &out[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	holder := -1
	for deadline := time.Now().Add(2 * time.Minute); holder < 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no sandbox took the lease within 2 minutes")
		}
		for i, e := range f.boxes {
			for _, ev := range logEvents(t, e.Log, "fleet.lease") {
				if ev["result"] == "taken" {
					holder = i
				}
			}
		}
	}
	// Mid-way: once the source has sent some of it.
	for deadline := time.Now().Add(2 * time.Minute); src.sent.Load() < size/4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the holder's download did not get a quarter of the way within 2 minutes")
		}
	}
	pid := cmds[holder].Process.Pid
	killed := guardtest.SessionProcs(pid) // the lease names one of them
	guardtest.KillSession(pid)
	for i, cmd := range cmds {
		_ = cmd.Wait()
		if i == holder {
			continue
		}
		f.checkModel(i, src.data, faultResult{Code: statusOf(cmd.ProcessState), Stderr: out[i].String()})
	}
	r := f.boxes[holder].RunPath(f.boxes[holder].Guard, "heal", "m.gguf")
	f.checkModel(holder, src.data, r)
	f.sweep()
	// One takeover, of the killed holder's lease; a second is the rare
	// race of a loaded machine (see TestFleetLeaseTakenOverAfterSIGKILL).
	// Each downloads the model once.
	var first string
	var firstAt time.Time
	over := 0
	for _, e := range f.boxes {
		for _, ev := range logEvents(t, e.Log, "fleet.lease") {
			if ev["result"] != "taken over" {
				continue
			}
			over++
			if ts, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["ts"])); first == "" || ts.Before(firstAt) {
				first, firstAt = fmt.Sprint(ev["reason"]), ts
			}
		}
	}
	if over < 1 || over > 2 {
		t.Errorf("%d takeovers of the killed holder's lease, want 1 (2 at most, a rare race)", over)
	}
	if !slices.ContainsFunc(killed, func(p guardtest.Proc) bool { return strings.Contains(first, "(pid "+strconv.Itoa(p.PID)+")") }) {
		t.Errorf("the first takeover was %q; the killed sandbox's processes were %s", first, guardtest.DescribeProcs(killed))
	}
	if sent := src.sent.Load(); sent > int64(1+over)*size {
		t.Errorf("the source sent %d bytes: more than the killed download and one whole one for each of %d takeovers (%d each at most)", sent, over, size)
	}
	t.Logf("%d takeovers; the source sent %d bytes (the model: %d)", over, src.sent.Load(), size)
}

// The registry stops while a sandbox downloads the model for the fleet:
// nobody hangs on it, each downloads from the model's own source and gets
// the whole model.
func TestFleetModelLeaseRegistryStopped(t *testing.T) {
	t.Parallel()
	const size = 4 << 20 // about 6 s from the slow source
	f, src := newModelFleet(t, 3, size, false)
	results := make([]faultResult, len(f.boxes))
	var wg sync.WaitGroup
	for i, e := range f.boxes {
		wg.Go(func() { results[i] = e.RunPath(e.Guard, "heal", "m.gguf") })
	}
	for deadline := time.Now().Add(2 * time.Minute); len(f.leaseEvents()) == 0 || f.leaseEvents()["taken"] == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no sandbox took the lease within 2 minutes")
		}
	}
	f.reg.Close()
	wg.Wait()
	for i, r := range results {
		f.checkModel(i, src.data, r)
	}
	if ev := f.leaseEvents(); ev["unavailable"] < 1 {
		t.Errorf("lease events %v: no waiter said the registry could not hold the lease", ev)
	}
	t.Logf("a waiter: %s", results[1])
}
