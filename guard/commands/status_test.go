package commands

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/creack/pty"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/progress"
)

// documentedReport is `guard status --json` as docs/status-json.md documents
// it. TestStatusJSONSchema fails when Report
// gains, loses or renames a key without this mirror, and so that page,
// following.
type documentedReport struct {
	Healthy  bool `json:"healthy"`
	Problems []struct {
		What string `json:"what"`
		Fix  string `json:"fix"` // guard heal, or guard heal --wait NAME while its heal runs in the background
	} `json:"problems"`
	NotFetched   []string `json:"not_fetched"`
	Manifest     string   `json:"manifest"`
	ShimDir      string   `json:"shim_dir"`
	ShimDirFirst bool     `json:"shim_dir_first_in_path"`
	Installed    bool     `json:"installed"`
	Shims        []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"shims"`
	Tools []struct {
		Name      string   `json:"name"`
		Target    string   `json:"target"`
		State     string   `json:"state"`
		Reason    string   `json:"reason"`
		Libraries []string `json:"libraries"`
		Static    bool     `json:"static"`
		Build     string   `json:"build"`
		Package   string   `json:"package"`
		Fix       string   `json:"fix"`
	} `json:"tools"`
	Builds []struct {
		Name      string    `json:"name"`
		Dir       string    `json:"dir"`
		DirExists bool      `json:"dir_exists"`
		Repo      string    `json:"repo"`
		Log       string    `json:"log"`
		BuiltAt   time.Time `json:"built_at"`
		BuildMS   int64     `json:"build_ms"`
		Prebuilt  *struct {
			GitHub string   `json:"github"`
			Native bool     `json:"native"`
			Ready  string   `json:"ready"`
			Dir    string   `json:"dir"`
			Lacks  []string `json:"lacks"`
		} `json:"prebuilt"`
		Stash struct {
			Entries int   `json:"entries"`
			Bytes   int64 `json:"bytes"`
			Matches bool  `json:"matches"`
			Sources []struct {
				URL    string    `json:"url"`
				At     time.Time `json:"at"`
				Result string    `json:"result"`
				Reason string    `json:"reason"`
			} `json:"sources"`
			PushTo    string `json:"push_to"`
			LastPush  string `json:"last_push"`
			NotPushed *struct {
				Recipe string    `json:"recipe"`
				Key    string    `json:"key"`
				Dest   string    `json:"dest"`
				Since  time.Time `json:"since"`
				Tries  int       `json:"tries"`
				Last   time.Time `json:"last_try"`
			} `json:"not_pushed"`
		} `json:"stash"`
	} `json:"builds"`
	Packages []struct {
		Command string `json:"command"`
		Package string `json:"package"`
		Present bool   `json:"present"`
	} `json:"packages"`
	Models []struct {
		File       string    `json:"file"`
		Path       string    `json:"path"`
		Role       string    `json:"role"`
		Size       int64     `json:"size"`
		OnDisk     int64     `json:"on_disk"`
		State      string    `json:"state"`
		Download   int64     `json:"download_bytes"`
		RetryAfter time.Time `json:"retry_after"`
		Reason     string    `json:"reason"`
		// Who declared the sha256 an ok model was verified against.
		SHA256DeclaredBy string  `json:"sha256_declared_by"`
		Fix              string  `json:"fix"`
		DeclaredTPS      float64 `json:"declared_tps"`
		MeasuredTPS      float64 `json:"measured_tps"`
		SpeedSamples     int     `json:"speed_samples"`
	} `json:"models"`
	Auth []struct {
		Name  string `json:"name"`
		OK    bool   `json:"ok"`
		Found string `json:"found"`
		Hint  string `json:"hint"`
		For   string `json:"for"`
	} `json:"auth"`
	Cache struct {
		Entries      int     `json:"entries"`
		Bytes        int64   `json:"bytes"`
		Hits         int64   `json:"hits"`
		Misses       int64   `json:"misses"`
		SavedSeconds float64 `json:"saved_seconds"`
	} `json:"cache"`
	Healing []struct {
		What          string    `json:"what"`
		Names         []string  `json:"names"`
		PID           int       `json:"pid"`
		Started       time.Time `json:"started"`
		Percent       float64   `json:"percent"`
		LeftMS        int64     `json:"left_ms"`
		LeftEstimated bool      `json:"left_estimated"`
		Phase         string    `json:"phase"`
		State         string    `json:"state"`
		Updated       time.Time `json:"updated"`
		Log           string    `json:"log"`
		Wait          string    `json:"wait"`
	} `json:"healing"`
	OpenClaw struct {
		Found       bool     `json:"found"`
		Config      string   `json:"config"`
		Protected   bool     `json:"protected"`
		PathPrepend []string `json:"path_prepend"`
		Declined    bool     `json:"declined"`
		Reason      string   `json:"reason"`
		Fix         string   `json:"fix"`
	} `json:"openclaw"`
	Log    string `json:"log"`
	Events []struct {
		TS          time.Time `json:"ts"`
		Level       string    `json:"level"`
		Event       string    `json:"event"`
		Tool        string    `json:"tool"`
		Target      string    `json:"target"`
		Reason      string    `json:"reason"`
		Result      string    `json:"result"`
		DurationMS  int64     `json:"duration_ms"`
		Bytes       int64     `json:"bytes"`
		Attempt     int       `json:"attempt"`
		Connections int       `json:"connections"`
		Install     string    `json:"install"`
		Detached    bool      `json:"detached"`
	} `json:"events"`
	OtherEvents        int  `json:"other_installs_events"`
	OlderEventsNotRead bool `json:"older_events_not_read"`
}

// TestStatusJSONSchema checks both ways, with every field filled (so no
// omitempty hides one), that Report and the documented schema have the
// same keys.
func TestStatusJSONSchema(t *testing.T) {
	t.Parallel()
	var code Report
	var doc documentedReport
	fill(reflect.ValueOf(&code).Elem())
	fill(reflect.ValueOf(&doc).Elem())
	strictRoundTrip(t, "Report -> documented schema", code, &documentedReport{})
	strictRoundTrip(t, "documented schema -> Report", doc, &Report{})
}

func strictRoundTrip(t *testing.T, what string, from, into any) {
	t.Helper()
	data, err := json.Marshal(from)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Errorf("%s: %v (update documentedReport and docs/status-json.md together)", what, err)
	}
	again, _ := json.Marshal(into)
	if len(keys(t, again)) != len(keys(t, data)) {
		t.Errorf("%s: a key was dropped:\n%s\nvs\n%s", what, data, again)
	}
}

// keys lists every object key in a JSON document, with its path.
func keys(t *testing.T, data []byte) []string {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				out = append(out, prefix+"."+k)
				walk(prefix+"."+k, e)
			}
		case []any:
			for _, e := range x {
				walk(prefix+"[]", e)
			}
		}
	}
	walk("", v)
	return out
}

// fill sets every field of v to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 8, 31, 12, 0, 0, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// statusEngine is an engine over a temporary HOME with the given manifest;
// env adds to (and overrides) the World's environment.
func statusEngine(t *testing.T, manifest string, stdout io.Writer, env ...string) *guard.Engine {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	mf := filepath.Join(dir, "manifest.toml")
	if err := os.WriteFile(mf, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	w := guard.World{
		Env: append([]string{
			"HOME=" + home,
			"GUARD_MANIFEST=" + mf,
			"GUARD_SHIM_DIR=" + filepath.Join(home, ".shim"),
			"GUARD_STATE_DIR=" + filepath.Join(dir, "state"),
			"GUARD_LOG=" + filepath.Join(dir, "selfheal.log"),
		}, env...),
		Stdout:    stdout,
		StdoutTTY: progress.IsTerminal(stdout),
		Stderr:    &bytes.Buffer{},
		Self:      "/proc/self/exe",
	}
	c, err := guard.LoadConfig(w)
	if err != nil {
		t.Fatal(err)
	}
	e := guard.New(c)
	t.Cleanup(e.Close)
	return e
}

func TestStatusJSONListsAreNeverNull(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	e := statusEngine(t, "[tools.x]\npath = \"/nonexistent/x\"\n", &out)
	healthy, err := Status(e, &out, StatusOptions{JSON: true, Events: 10})
	if err != nil {
		t.Fatal(err)
	}
	if healthy {
		t.Error("healthy with no shims and a missing tool")
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"problems", "not_fetched", "shims", "tools", "builds", "packages", "models", "auth", "events"} {
		if _, ok := got[k].([]any); !ok {
			t.Errorf("%s is %v, want a list", k, got[k])
		}
	}
}

// A coloured report, its escapes stripped, is the plain one: every painted
// column carries the same escape bytes, so tabwriter aligns it the same.
func TestStatusColourKeepsAlignment(t *testing.T) {
	t.Parallel()
	r := &Report{
		ShimDir: "/h/.shim", ShimDirFirst: false, Installed: true, Manifest: "/h/m.toml", LogPath: "/tmp/selfheal.log",
		Shims:    []ShimState{{"guard", "ok"}, {"llama-completion", "dangling"}},
		Tools:    []ToolState{{Name: "npx", Target: "/usr/bin/npx", State: "ok", Libraries: []string{"libc.so.6"}}, {Name: "llama-simple", State: "broken", Reason: "missing library libllama.so", Build: "llama-cpp"}},
		Builds:   []BuildState{{Name: "llama-cpp", Dir: "/h/llama.cpp", DirExists: true}, {Name: "other", Dir: "/x"}},
		Packages: []PackageState{{"cmake", "cmake", true}, {"g++", "g++", false}},
		Models:   []ModelState{{File: "a.gguf", Path: "/h/a.gguf", Size: 1 << 30, OnDisk: 1 << 20, State: "truncated"}, {File: "bb.gguf", Path: "/h/bb.gguf", Size: 10, State: "unverified"}},
		Auth:     []AuthState{{Name: "clawhub", Hint: "log in"}},
		Events:   []heallog.Record{{Event: "model.download", Tool: "x", Result: "failed", DurationMS: 1500}, {Event: "shim.recreate", Tool: "longer-name", Result: "ok"}, {Event: "timeout"}},
	}
	var plain, coloured bytes.Buffer
	(&printer{home: "/h", showEvents: true}).print(&plain, r)
	(&printer{home: "/h", showEvents: true, colour: true}).print(&coloured, r)
	if strings.Contains(plain.String(), "\x1b") {
		t.Fatalf("plain report has escapes:\n%s", plain.String())
	}
	if !strings.Contains(coloured.String(), red+"broken"+reset) {
		t.Fatalf("coloured report does not paint a broken tool red:\n%q", coloured.String())
	}
	stripped := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(coloured.String(), "")
	if stripped != plain.String() {
		t.Errorf("coloured report aligns differently:\n%s\nplain:\n%s", stripped, plain.String())
	}
	for _, want := range []string{
		"guard: not first in PATH: ~/.shim; run: export PATH=\"/h/.shim:$PATH\"\nguard: needs healing: shim llama-completion, tool llama-simple, model a.gguf; run guard heal\n",
		"manifest: ~/m.toml\n",
		"  npx           ok      /usr/bin/npx (1 library)\n",
		"  a.gguf     truncated   1.0 MiB of 1.0 GiB\n",
	} {
		if !strings.Contains(plain.String(), want) {
			t.Errorf("plain report lacks %q:\n%s", want, plain.String())
		}
	}
	for _, line := range strings.Split(plain.String(), "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing space in %q", line)
		}
	}
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 8, 31, 12, 0, 0, 0, time.Local)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"", time.Time{}},
		{"30m", now.Add(-30 * time.Minute)},
		{"2h", now.Add(-2 * time.Hour)},
		{"1d", now.AddDate(0, 0, -1)},
		{"2026-08-01", time.Date(2026, 8, 1, 0, 0, 0, 0, time.Local)},
		{"2026-08-01T15:04", time.Date(2026, 8, 1, 15, 4, 0, 0, time.Local)},
		{"2026-08-01 15:04", time.Date(2026, 8, 1, 15, 4, 0, 0, time.Local)},
		{"2026-08-01T15:04:05Z", time.Date(2026, 8, 1, 15, 4, 5, 0, time.UTC)},
	} {
		got, err := ParseSince(tc.in, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"yesterday", "-1h", "-2d", "d", "2026-13-01", "1w"} {
		if _, err := ParseSince(bad, now); err == nil || !strings.Contains(err.Error(), "bad --since") {
			t.Errorf("ParseSince(%q) error = %v, want a bad --since message", bad, err)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 420086080: "400.6 MiB", 1117320800: "1.0 GiB", 5 << 40: "5.0 TiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestUseColourOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	colour := func(out io.Writer, env ...string) bool {
		return UseColour(statusEngine(t, "", out, env...).Config())
	}
	if !colour(tty, "NO_COLOR=", "TERM=xterm") {
		t.Error("no colour on a terminal")
	}
	if colour(w, "TERM=xterm") || colour(&bytes.Buffer{}, "TERM=xterm") {
		t.Error("colour on a pipe or a buffer")
	}
	if colour(tty, "NO_COLOR=1", "TERM=xterm") {
		t.Error("colour with NO_COLOR set")
	}
	if colour(tty, "NO_COLOR=", "TERM=dumb") {
		t.Error("colour on a dumb terminal")
	}
}

// Names come from the manifest (a quoted TOML key may hold a newline) and
// the log (anyone's text): a control character in one is written escaped,
// so it can neither break the table into extra lines nor reach the
// terminal as an escape sequence.
func TestStatusEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	r := &Report{
		ShimDir: "/h/.shim", ShimDirFirst: true, Installed: true, Manifest: "/h/m.toml", LogPath: "/tmp/selfheal.log",
		Shims:    []ShimState{{"guard", "ok"}, {"evil\nname", "missing"}},
		Tools:    []ToolState{{Name: "evil\nname", State: "missing", Reason: "not found; tried /bin/evil\x1b[2J"}},
		Packages: []PackageState{{"cmd\tx", "pkg", true}},
		Models:   []ModelState{{File: "m\x1b[31m.gguf", Path: "/h/m\x1b[31m.gguf", Size: 10, State: "missing"}},
		Auth:     []AuthState{{Name: "a\u2028b", Hint: "log in\r"}},
		Events:   []heallog.Record{{Event: "shim.recreate", Tool: "a\rb", Target: "/h/.shim/a\rb", Result: "ok\x07"}},
	}
	var out bytes.Buffer
	(&printer{home: "/h", showEvents: true}).print(&out, r)
	text := out.String()
	if strings.ContainsAny(text, "\r\t\x1b\x07\u2028") {
		t.Fatalf("a control character reached the report:\n%q", text)
	}
	for _, want := range []string{
		"guard: needs healing: shim \"evil\\nname\", tool \"evil\\nname\", model \"m\\x1b[31m.gguf\"; run guard heal\n",
		"  \"evil\\nname\"  missing  -> guard\n",
		"  \"cmd\\tx\"  pkg  present\n",
		"\"~/.shim/a\\rb\"",
		"\"ok\\a\"",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	lines := strings.Count(text, "\n")
	if want := 24; lines != want { // one a row, as without the control characters
		t.Errorf("%d lines, want %d:\n%s", lines, want, text)
	}
}

// While a heal runs in the background, what fixes its tool or model is
// waiting for it, not a second heal: text and --json name guard heal
// --wait NAME (docs/status-json.md); what no heal runs for keeps guard heal.
func TestStatusFixOfWhatHealsInTheBackground(t *testing.T) {
	t.Parallel()
	r := &Report{
		ShimDir: "/h/.shim", ShimDirFirst: true, Installed: true, Manifest: "/h/m.toml",
		Tools:  []ToolState{{Name: "tool", State: "missing"}, {Name: "other", State: "missing"}},
		Models: []ModelState{{File: "m.gguf", Path: "/h/m.gguf", State: "missing"}},
		Healing: []HealingState{{What: "the build of demo", Names: []string{"tool"}, Wait: "guard heal --wait tool"},
			{What: "the download of m.gguf", Names: []string{"m.gguf"}, Wait: "guard heal --wait m.gguf"}},
	}
	want := []Problem{{"tool tool", "guard heal --wait tool"}, {"tool other", "guard heal"}, {"model m.gguf", "guard heal --wait m.gguf"}}
	if got := r.problems(); !slices.Equal(got, want) {
		t.Errorf("problems: %v, want %v", got, want)
	}
	var out bytes.Buffer
	(&printer{home: "/h"}).headline(&out, r)
	for _, line := range []string{
		"guard: healing in the background: tool tool; run guard heal --wait tool\n",
		"guard: needs healing: tool other; run guard heal\n",
		"guard: healing in the background: model m.gguf; run guard heal --wait m.gguf\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("headline lacks %q:\n%s", line, out.String())
		}
	}
}

// A shared log of other installs' events alone (bigger than the bound,
// with a .1): status reads no more than statusLogScan of it and says older
// events were not read.
func TestStatusBoundsTheLogRead(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	e := statusEngine(t, "", &out)
	log := e.Config().LogPath
	var b strings.Builder
	for i := 0; b.Len() < statusLogScan+(1<<20); i++ {
		fmt.Fprintf(&b, `{"level":"info","ts":"2026-01-01T00:00:%02dZ","event":"binary.rebuild","tool":"llama-completion","result":"ok","install":"/home/other/.cache/guard"}`+"\n", i%60)
	}
	for _, p := range []string{log, log + ".1"} {
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var read int64
	logRead := func(sc heallog.Scan) { read = sc.Read }
	if _, err := Status(e, &out, StatusOptions{Events: 10, logRead: logRead}); err != nil {
		t.Fatal(err)
	}
	if read == 0 || read > statusLogScan {
		t.Errorf("status read %d bytes of the log, want at most %d", read, statusLogScan)
	}
	if !strings.Contains(out.String(), "older events not read") {
		t.Errorf("status does not say older events were not read:\n%s", out.String())
	}
}

// The prebuilt's line says which of the recipe's tools the release lacks:
// their calls build them natively, even with native = false.
func TestPrebuiltLineNamesWhatTheReleaseLacks(t *testing.T) {
	for _, c := range []struct {
		pb   PrebuiltState
		want string
	}{
		{PrebuiltState{Native: true, Ready: "b2", Dir: "/s/p"},
			"the release b2 ready in /s/p: it answers while the native build is missing; the native build follows it"},
		{PrebuiltState{Native: true, Ready: "b2", Dir: "/s/p", Lacks: []string{"llama-simple"}},
			"the release b2 ready in /s/p: it answers while the native build is missing; it has no llama-simple: calls of it build it natively; the native build follows it"},
		{PrebuiltState{Native: false, Ready: "b2", Dir: "/s/p", Lacks: []string{"llama-simple"}},
			"the release b2 ready in /s/p: it answers while the native build is missing; it has no llama-simple: calls of it build it natively (native = false: nothing else is built)"},
		{PrebuiltState{Native: false, Ready: "b2", Dir: "/s/p"},
			"the release b2 ready in /s/p: it answers while the native build is missing; native = false: nothing is built"},
	} {
		if got := prebuiltLine(&c.pb); got != c.want {
			t.Errorf("prebuiltLine(%+v)\n got %q\nwant %q", c.pb, got, c.want)
		}
	}
}

// A build that goes through the fleet's lease says so in status's list of
// heals in the background: held here, or waited on with who builds
// (docs/fleet-lease.md); another build's phase says nothing of a fleet.
func TestStatusShowsTheFleetLease(t *testing.T) {
	t.Parallel()
	r := &Report{Healing: []HealingState{
		{What: "the build of a", Phase: "for the fleet, step 2/2 cmake: [50%] Building C object", Percent: -1, LeftMS: -1},
		{What: "the build of b", Phase: "built by host-7 for the fleet", Percent: 45, LeftMS: 180_000},
		{What: "the build of c", Phase: "step 1/2 cmake", Percent: -1, LeftMS: -1},
	}}
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	(&printer{home: "/h"}).healing(tw, r)
	tw.Flush()
	for _, want := range []string{
		"the build of a (for the fleet: the lease is held here)",
		"the build of b (built by host-7 for the fleet: waiting on its lease)  45%, about 3m0s left",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "the build of c (") {
		t.Errorf("a build outside the fleet's lease is said to be in it:\n%s", out.String())
	}
}
