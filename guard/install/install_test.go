package install_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/install"
	"github.com/sandbox-guard/guard/guard/state"
)

// A dotfiles manager's ~/.bashrc is a link into its repository: install
// edits the file the link names and leaves the link, and that file's mode,
// as they were. guard's own copy is the opposite: it must be a file of its
// own, so a link found in its place is replaced, never written through.
func TestInstallWritesThroughRCLinksButNotTheGuardCopy(t *testing.T) {
	home, dots, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	rc := filepath.Join(dots, "bashrc")
	if err := os.WriteFile(rc, []byte("alias ll='ls -l'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rc, filepath.Join(home, ".bashrc")); err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(elsewhere, "guard-build")
	if err := os.WriteFile(self, []byte("new guard"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(elsewhere, "old-guard")
	if err := os.WriteFile(old, []byte("old guard"), 0o755); err != nil {
		t.Fatal(err)
	}
	shims := filepath.Join(home, ".shim")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(old, filepath.Join(shims, install.GuardName)); err != nil {
		t.Fatal(err)
	}
	_, err := install.Install(install.Options{
		Home: home, ShimDir: shims, StateDir: filepath.Join(home, ".cache", "guard"),
		Self: self, Tools: []string{"npx"},
	})
	if err != nil {
		t.Fatal(err)
	}

	if fi, err := os.Lstat(filepath.Join(home, ".bashrc")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("~/.bashrc is no longer a link: %v %v", fi, err)
	}
	b, err := os.ReadFile(rc)
	if err != nil || !strings.HasPrefix(string(b), "# >>> guard: shims first in PATH") || !strings.HasSuffix(string(b), "# <<< guard <<<\nalias ll='ls -l'\n") {
		t.Fatalf("linked rc file: %q %v", b, err)
	}
	if fi, _ := os.Stat(rc); fi.Mode().Perm() != 0o600 {
		t.Fatalf("linked rc file mode %v, want its own 0600", fi.Mode().Perm())
	}
	// ~/.profile did not exist: a new file, 0644.
	if fi, err := os.Stat(filepath.Join(home, ".profile")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("~/.profile: %v %v", fi, err)
	}

	copyPath := filepath.Join(shims, install.GuardName)
	fi, err := os.Lstat(copyPath)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		t.Fatalf("guard's copy: %v %v, want a regular 0755 file", fi, err)
	}
	if b, _ := os.ReadFile(copyPath); string(b) != "new guard" {
		t.Fatalf("guard's copy holds %q", b)
	}
	if b, _ := os.ReadFile(old); string(b) != "old guard" {
		t.Fatalf("the link's old target was written: %q", b)
	}
}

// The lines a person pastes name the folder so that pasting them runs
// nothing but the export, whatever the folder is called.
func TestExportPathQuotesWhatAShellWouldExpand(t *testing.T) {
	for dir, want := range map[string]string{
		"/home/u/.shim":                `export PATH="/home/u/.shim:$PATH"`,
		"/tmp/sh$(touch /tmp/pwned) x": `export PATH='/tmp/sh$(touch /tmp/pwned) x'":$PATH"`,
		"/tmp/it's":                    `export PATH='/tmp/it'\''s'":$PATH"`,
		"/tmp/`id`":                    "export PATH='/tmp/`id`'\":$PATH\"",
	} {
		if got := install.ExportPath(dir); got != want {
			t.Errorf("ExportPath(%q) = %s, want %s", dir, got, want)
		}
	}
	if got := install.EnvPath("/tmp/a b"); got != `PATH='/tmp/a b'":$PATH"` {
		t.Errorf("EnvPath = %s", got)
	}
	// And a shell really reads the quoted line back as the folder.
	dir := "/tmp/sh$(echo pwned) x"
	out, err := exec.Command("sh", "-c", install.ExportPath(dir)+`; printf %s "${PATH%%:*}"`).Output()
	if err != nil || string(out) != dir {
		t.Errorf("sh read %q, %v; want %q", out, err, dir)
	}
}

// Uninstall removes exactly what install added: a start-up file install
// created goes when nothing else is in it; one the person had stays, even
// empty, and one the person wrote into since keeps what they wrote.
func TestUninstallRemovesTheStartUpFilesItCreated(t *testing.T) {
	home, elsewhere := t.TempDir(), t.TempDir()
	self := filepath.Join(elsewhere, "guard-build")
	if err := os.WriteFile(self, []byte("guard"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".profile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := install.Options{Home: home, ShimDir: filepath.Join(home, ".shim"), StateDir: filepath.Join(home, ".cache", "guard"), Self: self, Tools: []string{"npx"}}
	if _, err := install.Install(o); err != nil {
		t.Fatal(err)
	}
	if _, err := install.Install(o); err != nil { // twice changes nothing, the mark included
		t.Fatal(err)
	}
	r, err := install.Uninstall(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".bashrc")); !os.IsNotExist(err) {
		t.Errorf("~/.bashrc that install created is still there: %v", err)
	}
	// The report says what was done to each: the file removed, or the block.
	bashrc, profile := filepath.Join(home, ".bashrc"), filepath.Join(home, ".profile")
	if want := "removed " + bashrc + ", which guard install had created (nothing else was in it)"; !slices.Contains(r.Changes, want) {
		t.Errorf("uninstall reported %q; want %q", r.Changes, want)
	}
	if want := "removed the PATH block from " + profile; !slices.Contains(r.Changes, want) {
		t.Errorf("uninstall reported %q; want %q", r.Changes, want)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".profile")); err != nil || len(b) != 0 {
		t.Errorf("~/.profile the person had: %q, %v", b, err)
	}

	// Created by install, then written into by the person: it stays, with
	// what they wrote.
	if _, err := install.Install(o); err != nil {
		t.Fatal(err)
	}
	rc := filepath.Join(home, ".bashrc")
	b, _ := os.ReadFile(rc)
	if err := os.WriteFile(rc, append(b, "alias ll='ls -l'\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := install.Uninstall(o); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(rc); err != nil || string(b) != "alias ll='ls -l'\n" {
		t.Errorf("~/.bashrc after uninstall: %q, %v", b, err)
	}
}

// The install marker is guard's own file: a FIFO in its place is not
// waited on (a call reads it when the shim folder is gone whole).
func TestRecordedDoesNotWaitOnAFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(state.Layout{Dir: dir}.Installed(), 0o600); err != nil {
		t.Fatal(err)
	}
	guardtest.Within(t, "Recorded of a FIFO", func() {
		if m := install.Recorded(dir); m != (install.Marker{}) {
			t.Errorf("Recorded = %+v from a FIFO", m)
		}
	})
}

// A ~/.bashrc that is a FIFO, or a link to /dev/zero, is refused with an
// error naming it, at once: never waited on, read without end or replaced.
func TestInstallRefusesAnRCFileThatIsNotAFile(t *testing.T) {
	for _, plant := range []string{"fifo", "/dev/zero"} {
		t.Run(strings.TrimPrefix(plant, "/dev/"), func(t *testing.T) {
			home := t.TempDir()
			rc := filepath.Join(home, ".bashrc")
			if plant == "fifo" {
				if err := syscall.Mkfifo(rc, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(plant, rc); err != nil {
				t.Fatal(err)
			}
			self := filepath.Join(t.TempDir(), "guard-build")
			if err := os.WriteFile(self, []byte("guard"), 0o755); err != nil {
				t.Fatal(err)
			}
			guardtest.Within(t, "install with a "+plant+" ~/.bashrc", func() {
				_, err := install.Install(install.Options{
					Home: home, ShimDir: filepath.Join(home, ".shim"), StateDir: filepath.Join(home, ".cache", "guard"),
					Self: self, Tools: []string{"npx"},
				})
				if err == nil || !strings.Contains(err.Error(), ".bashrc") || !strings.Contains(err.Error(), "not a regular file") {
					t.Errorf("err = %v, want one naming ~/.bashrc as not a regular file", err)
				}
			})
			if fi, err := os.Lstat(rc); err != nil || fi.Mode().IsRegular() {
				t.Errorf("~/.bashrc was replaced: %v %v", fi, err)
			}
		})
	}
}
