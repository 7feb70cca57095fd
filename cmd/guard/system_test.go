package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemInstallRealRoot is the one test of `guard install --system`
// with the real folders: in a mount namespace of its own (unshare -m,
// private propagation), /usr/local/bin, /usr/local/lib and /etc/profile.d
// are empty tmpfs mounts that nobody outside the namespace sees, so the
// machine's own folders are never written. It shows the rows of the
// shell table of docs/shells.md that only --system reaches: env -i sh -c, a login
// shell through /etc/profile.d, and su -c to another user. It needs root
// and unshare; otherwise it skips.
func TestSystemInstallRealRoot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts many shells; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"unshare", "bash", "su", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	if err := exec.Command("unshare", "-m", "--propagation", "private", "true").Run(); err != nil {
		t.Skipf("no mount namespace here: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	home := filepath.Join(tmp, "home")
	for _, d := range []string{bin, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary is guard when it is called guard.
	if err := os.Symlink(exe, filepath.Join(bin, "guard")); err != nil {
		t.Fatal(err)
	}
	script := `set -e
for d in /usr/local/bin /usr/local/lib /etc/profile.d; do mount -t tmpfs -o mode=0755 tmpfs "$d"; done
guard install --system --no-rc >&2
row() { printf '%s: %s\n' "$1" "$(eval "$2" 2>/dev/null)"; }
row "env -i sh -c" "env -i sh -c 'command -v npx'"
row "login bash" "env -i HOME=$HOME TERM=dumb bash -lc 'command -v npx'"
row "su -c another user" "su nobody -s /bin/sh -c 'command -v npx'"
guard uninstall >&2
row "after uninstall" "ls -A /usr/local/bin /usr/local/lib /etc/profile.d | tr -d '\n'"
`
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Env = []string{
		"PATH=" + bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + home,
		"GUARD_LOG=" + filepath.Join(tmp, "selfheal.log"),
		"GUARD_STATE_DIR=" + filepath.Join(tmp, "state"),
		"GORACE=atexit_sleep_ms=0",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	want := "env -i sh -c: /usr/local/bin/npx\n" +
		"login bash: /usr/local/lib/guard/npx\n" +
		"su -c another user: /usr/local/bin/npx\n" +
		"after uninstall: /etc/profile.d:/usr/local/bin:/usr/local/lib:\n"
	if got := stdout.String(); got != want {
		t.Errorf("rows:\n%s\nwant:\n%s\ninstall and uninstall said:\n%s", got, want, stderr.String())
	}
	if !strings.Contains(stderr.String(), "linked /usr/local/bin/npx -> /usr/local/lib/guard/npx") {
		t.Errorf("install did not link /usr/local/bin/npx:\n%s", stderr.String())
	}
}
