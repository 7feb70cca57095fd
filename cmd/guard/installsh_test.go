package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestInstallScript runs install.sh the way a new user does, in a clean
// HOME: it builds a static guard, installs the shims and prints the one
// export line; run again after the shim folder was evicted, it restores
// it; without Go it says what to install and exits 1. The first run
// compiles guard without cgo (a few seconds with a warm module cache), so
// -short skips it.
func TestInstallScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds guard with go build (slow); skipped with -short")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go in PATH")
	}
	root := repoRoot()
	script := filepath.Join(root, "install.sh")
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	build := filepath.Join(tmp, "build")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	shims := filepath.Join(home, ".shim")
	env := []string{
		"HOME=" + home,
		"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin",
		"GUARD_BUILD_DIR=" + build,
		"GUARD_SHIM_DIR=" + shims,
		"GUARD_STATE_DIR=" + filepath.Join(tmp, "state"),
		"GUARD_LOG=" + filepath.Join(tmp, "selfheal.log"),
		// The caches stay the user's (a clean HOME must not mean a cold
		// compile of every dependency), and nothing is fetched.
		"GOCACHE=" + goEnv(t, "GOCACHE"),
		"GOMODCACHE=" + goEnv(t, "GOMODCACHE"),
		"GOPATH=" + goEnv(t, "GOPATH"),
		"GOPROXY=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=", // -mod=readonly by default: install.sh must never edit go.mod
	}

	out := runInstall(t, bash, script, root, env, 0)
	if !strings.Contains(out, "install.sh: building guard") {
		t.Errorf("no build line in:\n%s", out)
	}
	exports := regexp.MustCompile(`(?m)^\s*export PATH=.*$`).FindAllString(out, -1)
	if want := `export PATH="` + shims + `:$PATH"`; len(exports) != 1 || strings.TrimSpace(exports[0]) != want {
		t.Errorf("export lines %q, want exactly one: %s\n%s", exports, want, out)
	}
	checkStatic(t, filepath.Join(build, "guard"))
	checkShims(t, shims)
	if _, err := os.Stat(filepath.Join(home, ".config", "guard", "manifest.toml")); err != nil {
		t.Errorf("no default manifest: %v", err)
	}
	version, err := exec.Command(filepath.Join(shims, "guard"), "--version").Output()
	if err != nil {
		t.Fatalf("guard --version: %v", err)
	}
	wantVersion := `^guard version \S+ \(commit \S+, go1\.\d+`
	if _, err := os.Stat(filepath.Join(root, ".git")); err == nil {
		wantVersion = `^guard version \S+ \(commit [0-9a-f]{12}, go1\.\d+` // built inside the repository
	}
	if !regexp.MustCompile(wantVersion).Match(version) {
		t.Errorf("guard --version = %q, want %s", version, wantVersion)
	}

	// The sandbox evicts the shim folder; install.sh again brings it all back.
	if err := os.RemoveAll(shims); err != nil {
		t.Fatal(err)
	}
	out = runInstall(t, bash, script, root, env, 0)
	checkShims(t, shims)
	if !strings.Contains(out, "copied guard to "+shims) {
		t.Errorf("second run did not restore guard's copy:\n%s", out)
	}

	// No Go: a clear message, exit 1, nothing built.
	noGo := filepath.Join(tmp, "nogo-bin")
	if err := os.MkdirAll(noGo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s", tool)
		}
		if err := os.Symlink(p, filepath.Join(noGo, tool)); err != nil {
			t.Fatal(err)
		}
	}
	envNoGo := append(append([]string{}, env...), "PATH="+noGo, "GUARD_BUILD_DIR="+filepath.Join(tmp, "nogo-build"))
	out = runInstall(t, bash, script, root, envNoGo, 1)
	if !strings.Contains(out, "install.sh: Go is not installed or not in PATH; install Go 1.26 or newer") {
		t.Errorf("no clear message without Go:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(tmp, "nogo-build")); err == nil {
		t.Error("install.sh without Go still made a build folder")
	}
}

// runInstall runs install.sh and returns its stdout and stderr together.
func runInstall(t *testing.T, bash, script, dir string, env []string, wantStatus int) string {
	t.Helper()
	cmd := exec.Command(bash, script)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("install.sh took %v", time.Since(start).Round(time.Millisecond))
	if got := cmd.ProcessState.ExitCode(); got != wantStatus {
		t.Fatalf("install.sh exited %d (%v), want %d:\n%s", got, err, wantStatus, out.String())
	}
	return out.String()
}

// checkStatic: an ELF with no interpreter and no shared libraries.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("built guard: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not static", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v: not static", path, libs)
	}
}

// checkShims: guard's copy and a link to it for each default tool.
func checkShims(t *testing.T, dir string) {
	t.Helper()
	if fi, err := os.Stat(filepath.Join(dir, "guard")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("no executable guard in %s: %v", dir, err)
	}
	for _, name := range []string{"npx", "llama-completion", "llama-simple"} {
		if target, err := os.Readlink(filepath.Join(dir, name)); err != nil || target != "guard" {
			t.Errorf("%s/%s -> %q (%v), want a link to guard", dir, name, target, err)
		}
	}
}

// goEnv reads one go env value from the user's own environment.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
