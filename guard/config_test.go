package guard

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/runner"
)

func TestLoadConfigEnvironmentWinsOverManifest(t *testing.T) {
	b := newBed(t, `
log = "~/manifest.log"
shim_dir = "~/manifest-shims"
state_dir = "~/manifest-state"
`, "GUARD_TIMEOUT=2.5", "GUARD_CACHE=off", "GUARD_DEPTH=3", "HF_TOKEN=hf_x", "NO_COLOR=1", "GUARD_PROGRESS_EVERY=250ms")
	c := b.e.Config()
	if c.ShimDir != filepath.Join(b.home, ".shim") || c.StateDir != filepath.Join(b.dir, "state") || c.LogPath != filepath.Join(b.dir, "selfheal.log") {
		t.Errorf("paths from the environment lost: %q %q %q", c.ShimDir, c.StateDir, c.LogPath)
	}
	if c.Timeout != 2500*time.Millisecond || !c.CacheOff || c.Depth != 3 || c.HFToken != "hf_x" || !c.NoColour || c.ProgressEvery != 250*time.Millisecond {
		t.Errorf("environment read wrong: %+v", c)
	}
	if c.PathEnv != filepath.Join(b.dir, "bin") {
		t.Errorf("PATH = %q", c.PathEnv)
	}
	if c.ManifestPath != filepath.Join(b.dir, "manifest.toml") {
		t.Errorf("GUARD_MANIFEST does not name the user manifest: %q", c.ManifestPath)
	}
	c, err := LoadConfig(World{Env: []string{"HOME=" + b.home}})
	if err != nil || c.ManifestPath != filepath.Join(b.home, ".config/guard/manifest.toml") || c.M.Source != "(embedded default)" {
		t.Errorf("without GUARD_MANIFEST: %v, %q, %q", err, c.ManifestPath, c.M.Source)
	}
}

func TestLoadConfigManifestPathsExpandHome(t *testing.T) {
	dir := t.TempDir()
	mf := filepath.Join(dir, "m.toml")
	guardtest.WriteFile(t, mf, "log = \"~/l.log\"\nshim_dir = \"~/s\"\nstate_dir = \"~\"\n", 0o644)
	c, err := LoadConfig(World{Env: []string{"HOME=" + dir, "GUARD_MANIFEST=" + mf}})
	if err != nil {
		t.Fatal(err)
	}
	if c.ShimDir != filepath.Join(dir, "s") || c.StateDir != dir || c.LogPath != filepath.Join(dir, "l.log") {
		t.Errorf("got %q %q %q", c.ShimDir, c.StateDir, c.LogPath)
	}
}

func TestLoadConfigFailures(t *testing.T) {
	_, err := LoadConfig(World{Env: []string{"PATH=/bin"}})
	if ExitStatus(err) != runner.StatusGuardFailed || err.Error() != "HOME is not set\nset HOME to your home folder" {
		t.Errorf("no HOME: %v (status %d)", err, ExitStatus(err))
	}
	dir := t.TempDir()
	mf := filepath.Join(dir, "m.toml")
	guardtest.WriteFile(t, mf, "[tools.jq]\ntimout = \"5s\"\n", 0o644)
	_, err = LoadConfig(World{Env: []string{"HOME=" + dir, "GUARD_MANIFEST=" + mf}})
	if ExitStatus(err) != runner.StatusGuardFailed || !strings.Contains(err.Error(), "m.toml:2: unknown key tools.jq.timout (did you mean timeout?)") ||
		!strings.HasSuffix(err.Error(), "\nfix the manifest (guard manifest check) or unset GUARD_MANIFEST") {
		t.Errorf("bad manifest: %v (status %d)", err, ExitStatus(err))
	}
	// The user's own manifest, GUARD_MANIFEST unset: the hint must not
	// tell the person to unset what they never set.
	guardtest.WriteFile(t, filepath.Join(dir, ".config/guard/manifest.toml"), "[tools.jq]\ntimout = \"5s\"\n", 0o644)
	_, err = LoadConfig(World{Env: []string{"HOME=" + dir}})
	if ExitStatus(err) != runner.StatusGuardFailed || !strings.HasSuffix(err.Error(), "\nfix the manifest (guard manifest check)") {
		t.Errorf("bad user manifest: %v", err)
	}
}

func TestWorldLookupEnvLastWins(t *testing.T) {
	w := World{Env: []string{"A=1", "B=", "A=2", "junk"}}
	if v, ok := w.LookupEnv("A"); v != "2" || !ok {
		t.Errorf("A = %q, %v", v, ok)
	}
	if v, ok := w.LookupEnv("B"); v != "" || !ok {
		t.Errorf("B = %q, %v", v, ok)
	}
	if _, ok := w.LookupEnv("C"); ok {
		t.Error("C is set")
	}
}

func TestParseTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"": 0, "90s": 90 * time.Second, "2": 2 * time.Second, "0.5": 500 * time.Millisecond, "0": 0,
		// No practical limit, never a negative budget that drops the manifest's.
		"Inf": maxTimeout, "1e10": maxTimeout, "1e400": maxTimeout,
	} {
		if got, msg := parseTimeout(in); got != want || msg != "" {
			t.Errorf("parseTimeout(%q) = %v, %q; want %v", in, got, msg, want)
		}
	}
	for _, in := range []string{"abc", "-5", "-1s", "NaN", "-Inf", "5 s"} {
		if got, msg := parseTimeout(in); got != 0 || !strings.HasPrefix(msg, "GUARD_TIMEOUT="+strconv.Quote(in)) || !strings.HasSuffix(msg, "; ignored") {
			t.Errorf("parseTimeout(%q) = %v, %q; want 0 and a message naming the variable", in, got, msg)
		}
	}
}

func TestParseDepth(t *testing.T) {
	for in, want := range map[string]int{"": 0, "3": 3, "99999999999999999999": maxDepth, "100": maxDepth} {
		if got, msg := parseDepth(in); got != want || msg != "" {
			t.Errorf("parseDepth(%q) = %d, %q; want %d", in, got, msg, want)
		}
	}
	// A huge negative value must not switch the loop guard off.
	for _, in := range []string{"-99999999999999999999", "-1", "x"} {
		if got, msg := parseDepth(in); got != 0 || !strings.HasPrefix(msg, "GUARD_DEPTH=") {
			t.Errorf("parseDepth(%q) = %d, %q; want 0 and a message", in, got, msg)
		}
	}
}

// A typo in an environment variable is said once, naming it, and the call
// goes on as if it were unset; a negative depth cannot open a loop.
func TestLoadConfigSaysBadEnvironment(t *testing.T) {
	b := newBed(t, "", "GUARD_TIMEOUT=abc", "GUARD_DEPTH=-99999999999999999999")
	c := b.e.Config()
	if c.Timeout != 0 || c.Depth != 0 {
		t.Errorf("timeout %v, depth %d", c.Timeout, c.Depth)
	}
	got := b.stderr.String()
	if !strings.Contains(got, `guard: GUARD_TIMEOUT="abc" is not a duration (90s) or a number of seconds; ignored`) ||
		!strings.Contains(got, `guard: GUARD_DEPTH="-99999999999999999999" is not a count`) || strings.Count(got, "\n") != 2 {
		t.Errorf("stderr %q", got)
	}
	env := b.e.childEnv(c.tool("jq"))
	if !slices.Contains(env, "GUARD_DEPTH=1") {
		t.Errorf("the child's depth does not count from 0: %q", env)
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{&healError{errors.New("gone")}, 127},
		{&healError{&interruptedError{signal: syscall.SIGTERM}}, 143},
		{fmt.Errorf("wrapped: %w", &interruptedError{signal: syscall.SIGINT}), 130},
		{&guardError{err: errors.New("loop")}, 125},
		{&execError{fmt.Errorf("exec x: %w", syscall.ENOENT)}, 127},
		{&execError{fmt.Errorf("exec x: %w", syscall.EACCES)}, 126},
		{errors.New("anything else"), 127},
	} {
		if got := ExitStatus(tc.err); got != tc.want {
			t.Errorf("ExitStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestHealErrorHints(t *testing.T) {
	ro := &healError{fmt.Errorf("write /m/x.partial: %w", syscall.EROFS)}
	if !strings.Contains(ro.Error(), "\na folder guard writes to is read-only or not yours") {
		t.Errorf("read-only: %q", ro.Error())
	}
	full := &healError{fmt.Errorf("write: %w", syscall.ENOSPC)}
	if !strings.Contains(full.Error(), "\nthe disk is full") {
		t.Errorf("disk full: %q", full.Error())
	}
	if plain := (&healError{errors.New("plain")}).Error(); plain != "plain" {
		t.Errorf("plain: %q", plain)
	}
	ie := &interruptedError{signal: syscall.SIGTERM}
	if ie.Error() != "interrupted by SIGTERM while healing; partial work is kept for the next call" {
		t.Errorf("interrupted: %q", ie.Error())
	}
}

func TestTellPrefixesEveryLine(t *testing.T) {
	var out bytes.Buffer
	Tell(&out, "first\nsecond\n")
	if out.String() != "guard: first\nguard: second\n" {
		t.Errorf("%q", out.String())
	}
}

func TestRecoverTurnsAPanicInto125(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "selfheal.log")
	var stderr bytes.Buffer
	status := func() (status int) {
		defer Recover(&status, World{Env: []string{"GUARD_LOG=" + log}, Stderr: &stderr})
		panic("boom")
	}()
	if status != 125 || !strings.HasPrefix(stderr.String(), "guard: internal error: boom\n") {
		t.Errorf("status %d, stderr %q", status, stderr.String())
	}
	data, err := os.ReadFile(log)
	if err != nil || !strings.Contains(string(data), `"reason":"panic: boom"`) {
		t.Errorf("log %q, %v", data, err)
	}
}

// Only the shared default log gives way to the per-user one: a log the
// person chose (GUARD_LOG, a manifest's own) is theirs to fix.
func TestLogFallbackOnlyForTheSharedDefault(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	w := World{Env: []string{"HOME=" + dir, "GUARD_STATE_DIR=" + state}}
	c, err := LoadConfig(w)
	if err != nil {
		t.Fatal(err)
	}
	if c.LogPath != "/tmp/selfheal.log" || c.LogFallback != filepath.Join(state, "selfheal.log") {
		t.Errorf("default: log %q, fallback %q", c.LogPath, c.LogFallback)
	}
	if got := New(c).LogPath(); got != heallog.Where(c.LogPath, c.LogFallback) {
		t.Errorf("LogPath %q", got)
	}
	w.Env = append(w.Env, "GUARD_LOG="+filepath.Join(dir, "mine.log"))
	if c, _ := LoadConfig(w); c.LogFallback != "" {
		t.Errorf("GUARD_LOG set: fallback %q", c.LogFallback)
	}
	mf := filepath.Join(dir, "m.toml")
	guardtest.WriteFile(t, mf, "log = \"~/own.log\"\n", 0o644)
	if c, _ := LoadConfig(World{Env: []string{"HOME=" + dir, "GUARD_MANIFEST=" + mf}}); c.LogFallback != "" {
		t.Errorf("the manifest's own log: fallback %q", c.LogFallback)
	}
}
