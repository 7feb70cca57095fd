package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestNPMPackages: the packages made from a dist pack with npm pack, and
// npm install -g of this machine's platform package and the launcher into
// a prefix, offline (nothing from the registry: the other platform's
// optional package is skipped), gives a PREFIX/bin/guard whose --version
// is the release's and whose guard install sets up the shims.
func TestNPMPackages(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("no npm (it is in the README's package list)")
	}
	dist := makeDist(t)
	t.Chdir(repoRoot(t))
	var out strings.Builder
	if err := writeNPM(dist, Arches, &out); err != nil {
		t.Fatalf("writeNPM: %v\n%s", err, out.String())
	}

	var main packageJSON
	data, err := os.ReadFile(filepath.Join(dist, "npm", "guard", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &main); err != nil {
		t.Fatal(err)
	}
	if main.Name != npmMain || main.Version != testVersion || main.Bin["guard"] != "bin/guard.js" || len(main.OptionalDependencies) != len(Arches) {
		t.Errorf("main package.json: %+v", main)
	}
	if strings.Contains(string(data), `"scripts"`) {
		t.Error("the main package has scripts: nothing may run (or download) at install time")
	}

	tmp := t.TempDir()
	env := append(os.Environ(), "HOME="+filepath.Join(tmp, "home"), "npm_config_cache="+filepath.Join(tmp, "cache"),
		"npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false")
	npmRun := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(npm, args...)
		cmd.Env = env
		cmd.Dir = tmp
		cmd.WaitDelay = time.Second
		start := time.Now()
		b, err := cmd.CombinedOutput()
		t.Logf("npm %v took %v", args, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("npm %v: %v\n%s", args, err, b)
		}
		return strings.TrimSpace(string(b))
	}
	platform := filepath.Join(tmp, npmRun("pack", "--silent", filepath.Join(dist, "npm", "guard-linux-"+npmArch(runtime.GOARCH))))
	launcherTgz := filepath.Join(tmp, npmRun("pack", "--silent", filepath.Join(dist, "npm", "guard")))
	prefix := filepath.Join(tmp, "prefix")
	npmRun("install", "-g", "--offline", "--prefix", prefix, platform, launcherTgz)

	guard := filepath.Join(prefix, "bin", "guard")
	v, err := exec.Command(guard, "--version").Output()
	if err != nil || !strings.HasPrefix(string(v), "guard version "+testVersion+" (commit "+testCommit[:12]) {
		t.Fatalf("%s --version printed %q (%v)", guard, v, err)
	}

	home := filepath.Join(tmp, "home")
	shims := filepath.Join(home, ".shim")
	install := exec.Command(guard, "install", "--no-rc")
	install.Env = []string{"HOME=" + home, "PATH=" + filepath.Join(prefix, "bin") + ":/usr/bin:/bin", "GUARD_SHIM_DIR=" + shims,
		"GUARD_STATE_DIR=" + filepath.Join(tmp, "state"), "GUARD_LOG=" + filepath.Join(tmp, "selfheal.log")}
	if b, err := install.CombinedOutput(); err != nil {
		t.Fatalf("guard install from npm: %v\n%s", err, b)
	}
	if v, err := exec.Command(filepath.Join(shims, "guard"), "--version").Output(); err != nil || !strings.HasPrefix(string(v), "guard version "+testVersion) {
		t.Errorf("the shim folder's guard says %q (%v)", v, err)
	}
	// Each tool name is a hard link to guard's copy (docs/shells.md,
	// "OpenClaw").
	shim, err := os.Lstat(filepath.Join(shims, "npx"))
	copyInfo, cerr := os.Stat(filepath.Join(shims, "guard"))
	if err != nil || cerr != nil || !shim.Mode().IsRegular() || !os.SameFile(shim, copyInfo) {
		t.Errorf("npx shim: %v (%v, %v), want a hard link to guard's copy", shim, err, cerr)
	}
}
