package guard

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
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
	if ExitStatus(err) != runner.StatusGuardFailed || err.Error() != "HOME is not set; set it to your home folder" {
		t.Errorf("no HOME: %v (status %d)", err, ExitStatus(err))
	}
	dir := t.TempDir()
	mf := filepath.Join(dir, "m.toml")
	guardtest.WriteFile(t, mf, "[tools.jq]\ntimout = \"5s\"\n", 0o644)
	_, err = LoadConfig(World{Env: []string{"HOME=" + dir, "GUARD_MANIFEST=" + mf}})
	if ExitStatus(err) != runner.StatusGuardFailed || !strings.Contains(err.Error(), "m.toml:2") ||
		!strings.HasSuffix(err.Error(), "\nfix the manifest (guard manifest check) or unset GUARD_MANIFEST") {
		t.Errorf("bad manifest: %v (status %d)", err, ExitStatus(err))
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
		"": 0, "90s": 90 * time.Second, "2": 2 * time.Second, "0.5": 500 * time.Millisecond,
		"abc": 0, "-5": 0, "0": 0, "-1s": 0,
	} {
		if got := parseTimeout(in); got != want {
			t.Errorf("parseTimeout(%q) = %v, want %v", in, got, want)
		}
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

func TestShimWithoutHomeIs125(t *testing.T) {
	var stderr bytes.Buffer
	status := Shim(World{Env: []string{"PATH=/bin"}, Stderr: &stderr}, "npx", []string{"--version"})
	if status != 125 || stderr.String() != "guard: npx: HOME is not set; set it to your home folder\n" {
		t.Errorf("status %d, stderr %q", status, stderr.String())
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
