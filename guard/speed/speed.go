// Package speed learns how fast each model generates on this machine, so
// that a llama attempt's budget follows the machine instead of a figure in
// the manifest (which is only the prior).
//
// llama.cpp measures its own speed and prints it on stderr at the end of
// every run, llama-completion and llama-simple alike:
//
//	llama_perf_context_print:        eval time =    1250.00 ms /    31 runs   (   40.32 ms per token,    24.80 tokens per second)
//
// Tail reads that line as the output streams past, holding one partial line
// at most; Store keeps the last K speeds of each model per machine in one
// small file and turns them into the rate a budget is made from: a low
// percentile with a safety factor, so that a budget is long enough for the
// slow runs of a loaded machine and no longer.
package speed

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// Learning parameters (docs/llama-calls.md: "Budgets learned on this machine").
const (
	// K is how many of a model's last speeds are kept.
	K = 20
	// MinSamples is how many speeds it takes before they replace the
	// manifest's rate.
	MinSamples = 3
	// Percentile is the low percentile of the kept speeds a budget is made
	// from: one slow run in ten may be slower still.
	Percentile = 0.10
	// Safety divides that speed once more: a budget twice what the slow
	// runs needed.
	Safety = 2.0
	// News is the factor past which a new rate is news (budget.learned).
	News = 2.0
	// Floor is the least a learned budget gives: what a model needs to
	// load and answer at all, on a loaded machine. A rate alone (n/tps)
	// can come to a few milliseconds for a fast model and a short answer.
	Floor = 10 * time.Second
)

// minRuns is the fewest generated tokens that say anything about speed.
const minRuns = 2

// Parse returns the generation speed in tokens per second from one of
// llama.cpp's "eval time = X ms / N runs" lines; the prompt's "prompt eval
// time" and the sampler's lines are not generation speed.
func Parse(line string) (float64, bool) {
	i := strings.Index(line, "eval time =")
	if i < 0 || strings.HasSuffix(strings.TrimSpace(line[:i]), "prompt") {
		return 0, false
	}
	f := strings.Fields(line[i+len("eval time ="):])
	// X ms / N runs
	if len(f) < 5 || f[1] != "ms" || f[2] != "/" || f[4] != "runs" {
		return 0, false
	}
	ms, err1 := strconv.ParseFloat(f[0], 64)
	runs, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || !(ms > 0) || runs < minRuns {
		return 0, false
	}
	tps := float64(runs) / (ms / 1000)
	return tps, !math.IsInf(tps, 0) && tps > 0
}

// maxLine bounds the partial line a Tail holds: llama.cpp's perf lines are
// short, and a longer line is not one of them.
const maxLine = 512

// Tail passes everything written to it on to W (nil drops it) and keeps the
// last speed Parse finds in it. It is safe for one writer and a reader
// after the writer is done, from different goroutines.
type Tail struct {
	W io.Writer

	mu   sync.Mutex
	line []byte // the current partial line, up to maxLine
	long bool   // the current line passed maxLine: not a perf line
	tps  float64
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		part := rest
		if i >= 0 {
			part = rest[:i]
		}
		if !t.long && len(t.line)+len(part) <= maxLine {
			t.line = append(t.line, part...)
		} else {
			t.long, t.line = true, t.line[:0]
		}
		if i < 0 {
			break
		}
		t.endLine()
		rest = rest[i+1:]
	}
	t.mu.Unlock()
	if t.W == nil {
		return len(p), nil
	}
	return t.W.Write(p)
}

func (t *Tail) endLine() {
	if tps, ok := Parse(string(t.line)); ok && !t.long {
		t.tps = tps
	}
	t.line, t.long = t.line[:0], false
}

// Rate is the last speed seen, a last line without a newline included.
func (t *Tail) Rate() (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.line) > 0 {
		t.endLine()
	}
	return t.tps, t.tps > 0
}

// Store is the speeds measured on this machine, in one file of the state
// folder, by machine (a state folder on a shared home serves several) and
// model file name. It is a cache of measurements: a lost update (two calls
// recording at once) or an unreadable file costs a sample, never a call.
type Store struct {
	Path    string // state.Layout.Speeds()
	Machine string // the host name
}

// Model is one model's record on one machine.
type Model struct {
	TPS []float64 `json:"tps"` // the last K speeds, oldest first
	// Took is how long each of the last K good runs took, in seconds,
	// oldest first: a learned budget is never shorter (see Learned).
	Took    []float64 `json:"took,omitempty"`
	Logged  float64   `json:"logged,omitempty"` // the rate last logged as budget.learned
	Updated time.Time `json:"updated"`
}

type speedsFile struct {
	Machines map[string]map[string]*Model `json:"machines"`
}

// maxMachines bounds the file: the machines least recently updated go.
const maxMachines = 8

// maxFile bounds what is read back.
const maxFile = 1 << 20

func (s *Store) load() speedsFile {
	var f speedsFile
	if data, err := state.ReadRegular(s.Path, maxFile, true); err == nil {
		_ = json.Unmarshal(data, &f)
	}
	if f.Machines == nil {
		f.Machines = map[string]map[string]*Model{}
	}
	return f
}

func (s *Store) model(model string) *Model {
	if m := s.load().Machines[s.Machine][model]; m != nil {
		return m
	}
	return &Model{}
}

// Measured is the low percentile of model's kept speeds and how many there
// are (0 for none).
func (s *Store) Measured(model string) (float64, int) {
	m := s.model(model)
	return low(m.TPS), len(m.TPS)
}

// Rate is the rate model's budgets are made from, once MinSamples speeds
// were measured: the low percentile divided by Safety.
func (s *Store) Rate(model string) (float64, bool) {
	return rate(s.model(model).TPS)
}

// Learned is what budgets of model use once MinSamples speeds were
// measured: the rate (Rate), and the floor no learned budget goes under:
// Floor, and Safety times the longest of the last good runs, so that a run
// like the slowest good one still fits on a machine a little busier.
func (s *Store) Learned(model string) (tps float64, floor time.Duration, ok bool) {
	m := s.model(model)
	tps, ok = rate(m.TPS)
	if !ok {
		return 0, 0, false
	}
	floor = Floor
	for _, took := range m.Took {
		if d := time.Duration(took * Safety * float64(time.Second)); took > 0 && took < maxTook && d > floor {
			floor = d
		}
	}
	return tps, floor, true
}

// maxTook bounds a run's time read back: a longer one is not a run guard
// timed (a hand-edited file), and a time.Duration from it would overflow.
const maxTook = 1e6

// Forget drops what was learned of model on this machine, so that its
// budgets come from the manifest's rate again until MinSamples runs are
// measured anew: the machine is not the one the speeds were learned on.
func (s *Store) Forget(model string) error {
	f := s.load()
	ms := f.Machines[s.Machine]
	if ms[model] == nil {
		return nil
	}
	delete(ms, model)
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return state.Replace(s.Path, data, 0o600)
}

// Change is what one Record did to a model's rate.
type Change struct {
	From, To float64 // the rate before (the prior when none was learned) and after
	Learned  bool    // it moved by more than News since it was last logged
}

// Record adds one measured speed of model and the time its run took;
// prior is the manifest's rate, what budgets use until enough speeds are
// measured.
func (s *Store) Record(model string, tps float64, took time.Duration, prior float64) (Change, error) {
	f := s.load()
	ms := f.Machines[s.Machine]
	if ms == nil {
		ms = map[string]*Model{}
		f.Machines[s.Machine] = ms
		prune(f.Machines, s.Machine)
	}
	m := ms[model]
	if m == nil {
		m = &Model{}
		ms[model] = m
	}
	before, ok := rate(m.TPS)
	if !ok {
		before = prior
	}
	m.TPS = append(m.TPS, math.Round(tps*100)/100) // what llama.cpp printed: two decimals
	if len(m.TPS) > K {
		m.TPS = slices.Clone(m.TPS[len(m.TPS)-K:])
	}
	m.Took = append(m.Took, math.Round(took.Seconds()*1000)/1000)
	if len(m.Took) > K {
		m.Took = slices.Clone(m.Took[len(m.Took)-K:])
	}
	m.Updated = time.Now().UTC()
	c := Change{From: before, To: before}
	if after, ok := rate(m.TPS); ok {
		c.To = after
		logged := m.Logged
		if logged == 0 {
			logged = prior
		}
		if logged > 0 && (after > logged*News || after < logged/News) {
			c.Learned, c.From, m.Logged = true, logged, after
		}
	}
	data, err := json.Marshal(f)
	if err != nil {
		return c, err
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return c, err
	}
	return c, state.Replace(s.Path, data, 0o600)
}

// prune drops the machines least recently updated past maxMachines,
// keeping keep.
func prune(machines map[string]map[string]*Model, keep string) {
	for len(machines) > maxMachines {
		oldest, at := "", time.Time{}
		for name, ms := range machines {
			if name == keep {
				continue
			}
			var last time.Time
			for _, m := range ms {
				if m.Updated.After(last) {
					last = m.Updated
				}
			}
			if oldest == "" || last.Before(at) {
				oldest, at = name, last
			}
		}
		delete(machines, oldest)
	}
}

// low is the nearest-rank Percentile of speeds (0 for none).
func low(speeds []float64) float64 {
	if len(speeds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(speeds))
	i := int(math.Ceil(Percentile*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func rate(speeds []float64) (float64, bool) {
	if len(speeds) < MinSamples {
		return 0, false
	}
	return low(speeds) / Safety, true
}
