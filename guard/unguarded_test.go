package guard

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// openBed is a World in which guard itself cannot work (the caller breaks
// it), with a real tool in bin/ and guard's own links in a shim folder
// first in PATH. Nothing is started: exec is recorded.
type openBed struct {
	dir, home string
	w         World
	stderr    bytes.Buffer
	execs     [][]string
	envs      [][]string
}

func newOpenBed(t *testing.T, env ...string) *openBed {
	t.Helper()
	b := &openBed{dir: t.TempDir()}
	b.home = filepath.Join(b.dir, "home")
	shims := filepath.Join(b.home, ".shim")
	self := filepath.Join(shims, "guard")
	guardtest.WriteFile(t, self, "#!/bin/sh\n", 0o755)
	for _, name := range []string{"npx", "jq", "llama-completion"} {
		guardtest.WriteFile(t, filepath.Join(b.dir, "bin", name), "#!/bin/sh\n", 0o755)
		if err := os.Symlink("guard", filepath.Join(shims, name)); err != nil {
			t.Fatal(err)
		}
	}
	b.w = World{
		Env:    append([]string{"PATH=" + shims + ":" + filepath.Join(b.dir, "bin")}, env...),
		Stderr: &b.stderr,
		Self:   self,
	}
	return b
}

func (b *openBed) shim(name string, args ...string) int {
	return shim(b.w, name, args, func(path string, argv, env []string) error {
		b.execs = append(b.execs, argv)
		b.envs = append(b.envs, env)
		return nil
	})
}

// No HOME (cron, env -i): the real npx runs, with the embedded default's
// forced flags and environment, after one warning.
func TestShimWithoutHomeRunsTheToolUnguarded(t *testing.T) {
	b := newOpenBed(t)
	if got := b.shim("npx", "--version"); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	want := []string{filepath.Join(b.dir, "bin/npx"), "--yes", "--version"}
	if len(b.execs) != 1 || !slices.Equal(b.execs[0], want) {
		t.Fatalf("exec %q, want %q", b.execs, want)
	}
	if env := b.envs[0]; !slices.Contains(env, "npm_config_yes=true") || !slices.Contains(env, "GUARD_DEPTH=1") {
		t.Errorf("env %q lacks the default's npm_config_yes or the depth", env)
	}
	if got := b.stderr.String(); got != "guard: HOME is not set; running npx unguarded\nguard: set HOME to your home folder\n" {
		t.Errorf("stderr %q", got)
	}
}

// One typo in one tool's table must not stop every other tool.
func TestShimWithABadManifestRunsTheToolUnguarded(t *testing.T) {
	b := newOpenBed(t)
	mf := filepath.Join(b.home, ".config/guard/manifest.toml")
	guardtest.WriteFile(t, mf, "[tools.jq]\ntimeout = \"5s\"\n\n[tools.python3]\ntimout = \"5s\"\nfoo = 1\n", 0o644)
	b.w.Env = append(b.w.Env, "HOME="+b.home, "GUARD_STATE_DIR="+filepath.Join(b.dir, "state"))
	if got := b.shim("llama-completion", "-m", "x.gguf", "-p", "hi"); got != 0 {
		t.Fatalf("status %d; stderr %s", got, b.stderr.String())
	}
	// -no-cnv is the llama policy's forced flag: without it the real tool
	// waits on stdin for good.
	want := []string{filepath.Join(b.dir, "bin/llama-completion"), "-m", "x.gguf", "-p", "hi", "-no-cnv"}
	if len(b.execs) != 1 || !slices.Equal(b.execs[0], want) {
		t.Fatalf("exec %q, want %q", b.execs, want)
	}
	want1 := mf + ":5: unknown key tools.python3.timout (did you mean timeout?) (and 1 more); running llama-completion unguarded"
	if got := b.stderr.String(); got != "guard: "+want1+"\nguard: fix the manifest (guard manifest check)\n" {
		t.Errorf("stderr %q, want %q", got, want1)
	}
	// The embedded default's own path for it comes before PATH.
	built := filepath.Join(b.home, "llama.cpp/build/bin/llama-completion")
	guardtest.WriteFile(t, built, "#!/bin/sh\n", 0o755)
	b.shim("llama-completion", "-p", "hi")
	if got := b.execs[1][0]; got != built {
		t.Errorf("exec %s, want the default's path %s", got, built)
	}
}

// Failing open still refuses a shim loop, and a tool that is nowhere is
// the shell's 127.
func TestShimUnguardedLimits(t *testing.T) {
	b := newOpenBed(t, "GUARD_DEPTH=8")
	if got := b.shim("jq", "."); got != 125 || len(b.execs) != 0 || !strings.Contains(b.stderr.String(), "refused") {
		t.Errorf("a loop: status %d, execs %q, stderr %q", got, b.execs, b.stderr.String())
	}
	b = newOpenBed(t)
	if got := b.shim("nosuchtool"); got != 127 || len(b.execs) != 0 || !strings.Contains(b.stderr.String(), "nosuchtool: not found; tried") {
		t.Errorf("missing: status %d, stderr %q", got, b.stderr.String())
	}
	b = newOpenBed(t)
	fail := func(string, []string, []string) error { return fmt.Errorf("exec: %w", syscall.EACCES) }
	if got := shim(b.w, "jq", nil, fail); got != 126 {
		t.Errorf("exec failure: status %d", got)
	}
}
