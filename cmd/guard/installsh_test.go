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
// it; without Go it says what to install and exits 1. Then the issue's
// "done when": after install.sh, `rm -rf ~/.shim` and a new `bash -lc 'npx
// --version'` ends protected again (the PATH block rebuilds guard from
// this source folder), or, with no Go left, tells the person exactly what
// to run. The first run compiles guard without cgo (a few seconds with a
// warm module cache), so -short skips it.
func TestInstallScript(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds guard with go build (slow); skipped with -short")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	realGo, err := exec.LookPath("go")
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
	// Go is reached through a link of the test's own, so the test can take
	// it away later as a sandbox would.
	goDir := filepath.Join(tmp, "go-bin")
	if err := os.MkdirAll(goDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realGo, filepath.Join(goDir, "go")); err != nil {
		t.Fatal(err)
	}
	shims := filepath.Join(home, ".shim")
	env := []string{
		"HOME=" + home,
		"PATH=" + goDir + ":/usr/local/bin:/usr/bin:/bin",
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
		// A rebuild from source takes longer than a shell's start waits for
		// it by default (it goes on in the background then): the login shell
		// here waits for the whole rebuild. The wait has a test of its own
		// (TestRestoreAtShellStartDoesNotWaitForASlowMirror).
		"GUARD_RESTORE_WAIT=1800",
	}

	out := runInstall(t, bash, script, root, env, 0)
	for _, want := range []string{"install.sh: building guard", "install.sh: built " + build + "/guard in "} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q line in:\n%s", want, out)
		}
	}
	exports := regexp.MustCompile(`(?m)^\s*export PATH=.*$`).FindAllString(out, -1)
	if want := `export PATH="` + shims + `:$PATH"`; len(exports) != 1 || strings.TrimSpace(exports[0]) != want {
		t.Errorf("export lines %q, want exactly one: %s\n%s", exports, want, out)
	}
	if want := "restores itself from: a rebuild of " + root; !strings.Contains(out, want) {
		t.Errorf("install did not record its source folder (%q):\n%s", want, out)
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
	if _, err := os.Stat(filepath.Join(root, ".git")); err == nil && !strings.Contains(goEnv(t, "GOFLAGS"), "-buildvcs=false") {
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

	// guard install by hand (no --source) keeps the folder install.sh
	// recorded, so the restore script still rebuilds from it.
	byHand := exec.Command(filepath.Join(shims, "guard"), "install")
	byHand.Env = env
	if out, err := byHand.CombinedOutput(); err != nil || !strings.Contains(string(out), "restores itself from: a rebuild of "+root) {
		t.Errorf("guard install by hand forgot the source folder (%v):\n%s", err, out)
	}

	// Evicted again, and nobody runs install.sh: the next login shell
	// rebuilds guard from this folder, and the call it runs is guard's.
	t.Run("a login shell restores guard", func(t *testing.T) {
		if _, err := exec.LookPath("npx"); err != nil {
			t.Skip("npx is not installed, so no login shell calls it to show the restore (apt-get install npm)")
		}
		if err := os.RemoveAll(shims); err != nil {
			t.Fatal(err)
		}
		stdout, stderr := loginShell(t, bash, env, "npx --version")
		if !regexp.MustCompile(`^\d+\.\d+\.\d+\n$`).MatchString(stdout) {
			t.Errorf("bash -lc 'npx --version' printed %q on stdout (stderr:\n%s)", stdout, stderr)
		}
		// One line, naming the log that holds what install.sh printed.
		restoreLog := filepath.Join(tmp, "state", "restore.log")
		if want := "guard: restored " + shims + "/guard (rebuilt from " + root + "; its output is in " + restoreLog + ")\n"; stderr != want {
			t.Errorf("the shell's stderr is not the one line %q:\n%s", want, stderr)
		}
		if b, _ := os.ReadFile(restoreLog); !strings.Contains(string(b), "install.sh: built ") {
			t.Errorf("the restore log does not hold install.sh's output:\n%s", b)
		}
		checkShims(t, shims)
		if stdout, _ := loginShell(t, bash, env, "command -v npx"); stdout != shims+"/npx\n" {
			t.Errorf("after the restore, npx is %q, want the shim", stdout)
		}
	})

	// Evicted once more, and Go is gone too: every new shell says that
	// protection is off and what to run.
	if err := os.Remove(filepath.Join(goDir, "go")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(shims); err != nil {
		t.Fatal(err)
	}
	_, stderr := loginShell(t, bash, env, "true")
	if want := "guard: protection is off: " + shims + "/guard is missing or broken and could not be restored (why: " + filepath.Join(tmp, "state", "restore.log") + "); restore it: cd '" + root + "' && ./install.sh\n"; stderr != want {
		t.Errorf("the shell's stderr does not end with %q:\n%s", want, stderr)
	}

	// No Go: a clear message naming go.mod's Go; install.sh turns to the
	// release archive, which needs tools this PATH lacks: exit 1, nothing
	// built or installed (cmd/release tests the release install itself).
	noGo := filepath.Join(tmp, "nogo-bin")
	if err := os.MkdirAll(noGo, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"dirname", "sed"} {
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
	for _, want := range []string{"install.sh: Go is not installed or not in PATH; install Go " + goModVersion(t, root) + " or newer",
		"installing the release archive for this machine instead", "install.sh: the release install needs uname, which is not in PATH; nothing was installed"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q without Go:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "nogo-build")); err == nil {
		t.Error("install.sh without Go still made a build folder")
	}
}

// TestInstallScriptShowsTheCompilerError: a build that fails prints the
// compiler's own message (install.sh used to drop it and retry blindly).
// It runs under sh (dash on Debian), as `sh install.sh` does: the script
// is POSIX sh.
func TestInstallScriptShowsTheCompilerError(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs go build (slow); skipped with -short")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go in PATH")
	}
	src := filepath.Join(t.TempDir(), "src")
	copyTree(t, repoRoot(), src)
	main := filepath.Join(src, "cmd", "guard", "main.go")
	data, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, append(data, []byte("\nfunc broken() { return 1 }\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	env := []string{
		"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GUARD_BUILD_DIR=" + filepath.Join(src, "bin"),
		"GOCACHE=" + goEnv(t, "GOCACHE"), "GOMODCACHE=" + goEnv(t, "GOMODCACHE"), "GOPATH=" + goEnv(t, "GOPATH"),
		"GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=",
	}
	out := runInstall(t, sh, filepath.Join(src, "install.sh"), src, env, 1)
	for _, want := range []string{"main.go:", "too many return values", "install.sh: go build failed (its output is above)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".shim")); err == nil {
		t.Error("a failed build still installed something")
	}
}

// loginShell runs `bash -lc cmd` in env, as an agent harness starts a
// command, and returns its stdout and stderr.
func loginShell(t *testing.T, bash string, env []string, cmd string) (string, string) {
	t.Helper()
	c := exec.Command(bash, "-lc", cmd)
	c.Env = env
	c.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	c.WaitDelay = time.Second
	start := time.Now()
	err := c.Run()
	t.Logf("bash -lc %q took %v (%v)", cmd, time.Since(start).Round(time.Millisecond), err)
	return stdout.String(), stderr.String()
}

// goModVersion is the go line of go.mod: the Go release install.sh and the
// README ask for.
func goModVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// copyTree copies the repository's files (not .git, not bin) to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() && (rel == ".git" || rel == "bin") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
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

// checkShims: guard's copy and a hard link to it for each default tool
// (a path of its own: docs/shells.md, "OpenClaw").
func checkShims(t *testing.T, dir string) {
	t.Helper()
	copyInfo, err := os.Stat(filepath.Join(dir, "guard"))
	if err != nil || copyInfo.Mode()&0o111 == 0 {
		t.Fatalf("no executable guard in %s: %v", dir, err)
	}
	for _, name := range []string{"npx", "llama-completion", "llama-simple"} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, copyInfo) {
			t.Errorf("%s/%s: %v (%v), want a hard link to guard's copy", dir, name, fi, err)
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
