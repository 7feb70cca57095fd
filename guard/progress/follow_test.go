package progress

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// fakeClock is a clock a test moves: a tick is sent only when the test
// says so, and now is what the test set.
type fakeClock struct {
	t    time.Time
	tick chan time.Time
}

func (c *fakeClock) now() time.Time { return c.t }

// lineWriter hands each line written to the test.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// A call that follows a detached build off a terminal prints one line per
// tick of its clock (every 30 s by default), each with the build's percent
// and the time left, and no bar.
func TestFollowedLinesCarryPercentAndTimeLeft(t *testing.T) {
	t.Parallel()
	if DefaultEvery != 30*time.Second {
		t.Fatalf("DefaultEvery = %s, want 30s", DefaultEvery)
	}
	out := make(lineWriter)
	c := &fakeClock{t: time.Unix(1e9, 0), tick: make(chan time.Time)}
	r := start(out, false, "rebuilding demo in the background", 0, timing{c.tick, c.now}, nil)
	var got []string
	for _, s := range []Snapshot{
		{Percent: 30, Left: 7 * time.Second, Status: "[ 30%] cc obj3.o"},
		{Percent: 60, Left: 4 * time.Second, Status: "[ 60%] cc obj6.o"},
	} {
		r.Show(s)
		c.t = c.t.Add(DefaultEvery)
		c.tick <- c.t
		got = append(got, strings.TrimSuffix(<-out, "\n"))
	}
	r.Stop("")
	want := []string{
		"guard: rebuilding demo in the background  30%, about 7s left (30s): [ 30%] cc obj3.o",
		"guard: rebuilding demo in the background  60%, about 4s left (1m0s): [ 60%] cc obj6.o",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// On a terminal the same line has a bar, redrawn in place.
func TestFollowedLineOnATerminalHasABar(t *testing.T) {
	t.Parallel()
	c := &fakeClock{t: time.Unix(1e9, 0), tick: make(chan time.Time)}
	r := start(&guardtest.Buffer{}, true, "building demo", 0, timing{c.tick, c.now}, nil)
	defer r.Stop("")
	r.Show(Snapshot{Percent: 50, Left: -1})
	if line := r.Line(); line != "guard: building demo [==========          ]  50% (0s)" {
		t.Fatalf("line %q", line)
	}
}

// A build's own lines give its percent, and its last good build here the
// time left: the share of that build still to do.
func TestBuildPercentAndTimeLeft(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]float64{
		"[ 46%] Building CXX object src/llama.o":  46,
		"[100%] Built target llama-completion":    100,
		"[123/246] Building CXX object ggml.o":    50,
		"step 1/2 cmake: [  5%] Generating build": 5,
	} {
		got, ok := ParsePercent(line)
		if !ok || got != want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", line, got, ok, want)
		}
	}
	for _, line := range []string{"step 1/2 make", "[300%]", "[9/3]", "no mark"} {
		if _, ok := ParsePercent(line); ok {
			t.Errorf("ParsePercent(%q) found a percent", line)
		}
	}
	c := &fakeClock{t: time.Unix(1e9, 0), tick: make(chan time.Time)}
	r := start(&guardtest.Buffer{}, false, "building demo", 0, timing{c.tick, c.now}, nil)
	defer r.Stop("")
	r.Expect(10 * time.Second)
	c.t = c.t.Add(2 * time.Second)
	if s := r.Snapshot(); s.Percent != -1 || s.Left != 8*time.Second {
		t.Fatalf("before any percent: %+v", s)
	}
	r.SetStatus("step 1/1 make: [ 40%] cc obj4.o")
	if s := r.Snapshot(); s.Percent != 40 || s.Left != 6*time.Second {
		t.Fatalf("at 40%%: %+v", s)
	}
}

// A download's time left follows its recent rate: a fast first burst
// must not promise what the trickle since cannot keep.
func TestDownloadTimeLeftFollowsTheRecentRate(t *testing.T) {
	t.Parallel()
	c := &fakeClock{t: time.Unix(1e9, 0), tick: make(chan time.Time)}
	r := start(&guardtest.Buffer{}, false, "downloading m.gguf", 1000_000, timing{c.tick, c.now}, nil)
	defer r.Stop("")
	r.Add(600_000) // the burst, in no time
	r.Snapshot()
	for range 3 {
		c.t = c.t.Add(time.Second)
		r.Add(10_000) // then 10 kB/s
		r.Snapshot()
	}
	// 370 kB at 10 kB/s, not at the 210 kB/s of the whole attempt.
	if s := r.Snapshot(); s.Left != 37*time.Second {
		t.Fatalf("left %v", s.Left)
	}
}

// Each reporter observes through its own Pace, not a setting of the
// process: two heals side by side keep their snapshots apart, an observed
// reporter prints no line, and its last word clears its phase.
func TestObserversArePerReporter(t *testing.T) {
	t.Parallel()
	type seen struct{ a, b []Snapshot }
	var got seen
	var outA, outB guardtest.Buffer
	ca := &fakeClock{t: time.Unix(1e9, 0), tick: make(chan time.Time)}
	cb := &fakeClock{t: time.Unix(1e9, 0), tick: make(chan time.Time)}
	a := start(&outA, false, "building a", 0, timing{ca.tick, ca.now}, func(s Snapshot) { got.a = append(got.a, s) })
	b := start(&outB, false, "downloading b", 100, timing{cb.tick, cb.now}, func(s Snapshot) { got.b = append(got.b, s) })
	a.SetStatus("[ 40%] cc a.o")
	b.Add(25)
	ca.tick <- ca.t // handed over only once the loop took it
	cb.tick <- cb.t
	a.Stop("")
	b.Stop("")
	if len(got.a) != 2 || got.a[0].Percent != 40 || got.a[0].Status == "" || got.a[1].Status != "" {
		t.Errorf("a observed %+v, want its 40%% and then a last word with no phase", got.a)
	}
	if len(got.b) != 2 || got.b[0].Percent != 25 {
		t.Errorf("b observed %+v, want its own 25%%", got.b)
	}
	if outA.String() != "" || outB.String() != "" {
		t.Errorf("an observed reporter printed %q and %q", outA.String(), outB.String())
	}
}
