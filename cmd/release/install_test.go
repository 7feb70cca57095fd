package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// installerTools are the commands install.sh and restore.sh need from a
// release, linked into a PATH of the test's own: no go among them, so
// nothing can be built.
var installerTools = []string{"sh", "bash", "uname", "mktemp", "tar", "gzip", "sha256sum", "awk", "sed", "grep",
	"cp", "rm", "mkdir", "dirname", "basename", "cat", "chmod", "touch", "find", "flock", "curl", "env", "ls", "sleep", "id",
	"mkfifo", "timeout", "head"}

// sandbox is a fresh HOME with a PATH of links to installerTools, and
// guard's files in folders of its own. A login shell's PATH is the
// system's (/etc/profile sets it), where go is not either; its npx is the
// real one (npm is in the README's package list).
type sandbox struct {
	t                *testing.T
	home, shims, bin string
	env              []string
}

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	tmp := t.TempDir()
	s := &sandbox{t: t, home: filepath.Join(tmp, "home"), bin: filepath.Join(tmp, "bin")}
	s.shims = filepath.Join(s.home, ".shim")
	for _, d := range []string{s.home, s.bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range installerTools {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s", tool)
		}
		if err := os.Symlink(p, filepath.Join(s.bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	s.env = []string{"HOME=" + s.home, "PATH=" + s.bin, "GUARD_SHIM_DIR=" + s.shims,
		"GUARD_STATE_DIR=" + filepath.Join(tmp, "state"), "GUARD_LOG=" + filepath.Join(tmp, "selfheal.log"),
		// A login shell here waits for the whole restore, however loaded
		// the machine: the shell-start wait has a test of its own
		// (TestRestoreAtShellStartDoesNotWaitForASlowMirror in cmd/guard).
		"GUARD_RESTORE_WAIT=600"}
	return s
}

// install runs install.sh as `curl -fsSL URL | sh -s -- ARGS` does: the
// script on stdin, in a folder that is no checkout; it returns the status
// and what it printed.
func (s *sandbox) install(args ...string) (int, string) {
	s.t.Helper()
	script, err := os.ReadFile(filepath.Join(repoRoot(s.t), "install.sh"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(s.bin, "sh"), append([]string{"-s", "--"}, args...)...)
	cmd.Stdin = bytes.NewReader(script)
	cmd.Dir = s.home
	cmd.Env = s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	start := time.Now()
	err = cmd.Run()
	s.t.Logf("install.sh %v took %v (%v)", args, time.Since(start).Round(time.Millisecond), err)
	return cmd.ProcessState.ExitCode(), out.String()
}

// login runs `bash -lc cmd`, as an agent harness starts a command.
func (s *sandbox) login(cmd string) (string, string) {
	s.t.Helper()
	c := exec.Command(filepath.Join(s.bin, "bash"), "-lc", cmd)
	c.Env = s.env
	c.Dir = s.home
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	c.WaitDelay = time.Second
	start := time.Now()
	err := c.Run()
	s.t.Logf("bash -lc %q took %v (%v)", cmd, time.Since(start).Round(time.Millisecond), err)
	return stdout.String(), stderr.String()
}

// untouched: nothing of guard's in HOME, no start-up file, no state.
func (s *sandbox) untouched() {
	s.t.Helper()
	entries, err := os.ReadDir(s.home)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		s.t.Errorf("a refused install left %s in HOME", e.Name())
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.home), "state")); err == nil {
		s.t.Error("a refused install made guard's state folder")
	}
}

// TestInstallFromRelease is issue 22's "done when": from a release served
// over loopback HTTP and file://, on a fresh HOME with no go on PATH,
// install.sh installs guard, a login shell's npx runs through the shim,
// and once ~/.shim/guard is gone the next login shell fetches the release
// archive again, verifies it and restores guard with no Go.
func TestInstallFromRelease(t *testing.T) {
	t.Parallel() // each in its own sandbox: together they take the longest one's time, not the sum (docs/contributing.md)
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("no npx (npm is in the README's package list)")
	}
	dist := makeDist(t)
	srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer srv.Close()
	archive := ArchiveName(testVersion, runtime.GOARCH)
	for _, base := range []string{srv.URL, "file://" + dist} {
		t.Run(strings.SplitN(base, ":", 2)[0], func(t *testing.T) {
			s := newSandbox(t)
			code, out := s.install("--from", base)
			if code != 0 {
				t.Fatalf("install.sh --from %s exited %d:\n%s", base, code, out)
			}
			if want := "matches checksums.txt"; !strings.Contains(out, want) {
				t.Errorf("no %q in:\n%s", want, out)
			}
			if want := "restores itself from: " + base + "/" + archive + " (pinned sha256)"; !strings.Contains(out, want) {
				t.Errorf("install did not record the release archive (%q):\n%s", want, out)
			}
			if stdout, stderr := s.login("npx --version"); !npmVersion.MatchString(stdout) {
				t.Errorf("bash -lc 'npx --version' printed %q (stderr:\n%s)", stdout, stderr)
			}
			if stdout, _ := s.login("command -v npx"); stdout != s.shims+"/npx\n" {
				t.Errorf("npx is %q, want the shim", stdout)
			}

			if err := os.Remove(filepath.Join(s.shims, "guard")); err != nil {
				t.Fatal(err)
			}
			stdout, stderr := s.login("npx --version")
			if !npmVersion.MatchString(stdout) {
				t.Errorf("after the eviction, bash -lc 'npx --version' printed %q (stderr:\n%s)", stdout, stderr)
			}
			restoreLog := filepath.Join(filepath.Dir(s.home), "state", "restore.log")
			if want := "guard: restored " + s.shims + "/guard (fetched from " + base + "/" + archive + "; its output is in " + restoreLog + ")\n"; stderr != want {
				t.Errorf("the shell's stderr is not the one line %q:\n%s", want, stderr)
			}
			if v, err := exec.Command(filepath.Join(s.shims, "guard"), "--version").Output(); err != nil || !strings.HasPrefix(string(v), "guard version "+testVersion+" ") {
				t.Errorf("the restored guard says %q (%v)", v, err)
			}
		})
	}
}

var npmVersion = regexp.MustCompile(`^\d+\.\d+\.\d+\n$`)

// TestInstallFromAnArchive: offline, install.sh --archive FILE checks it
// against the checksums.txt beside it and installs it.
func TestInstallFromAnArchive(t *testing.T) {
	t.Parallel() // each in its own sandbox: together they take the longest one's time, not the sum (docs/contributing.md)
	dist := makeDist(t)
	s := newSandbox(t)
	path := filepath.Join(dist, ArchiveName(testVersion, runtime.GOARCH))
	code, out := s.install("--archive", path, "--no-rc")
	if code != 0 {
		t.Fatalf("install.sh --archive exited %d:\n%s", code, out)
	}
	if want := "restores itself from: what the restore script already says"; !strings.Contains(out, want) {
		t.Errorf("no %q in:\n%s", want, out)
	}
	if _, err := os.Stat(filepath.Join(s.shims, "guard")); err != nil {
		t.Errorf("no guard in the shim folder: %v", err)
	}
}

// TestRestoreFromAnArchiveInAFolderWithASpace: an archive installed offline
// from a folder whose name holds a space is fetched again, whole, when
// guard's copy is evicted (restore.sh used to split its URL at the space).
func TestRestoreFromAnArchiveInAFolderWithASpace(t *testing.T) {
	t.Parallel() // each in its own sandbox: together they take the longest one's time, not the sum (docs/contributing.md)
	dist := filepath.Join(t.TempDir(), "release files")
	if err := os.Rename(makeDist(t), dist); err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t)
	if code, out := s.install("--archive", filepath.Join(dist, ArchiveName(testVersion, runtime.GOARCH))); code != 0 {
		t.Fatalf("install.sh --archive exited %d:\n%s", code, out)
	}
	if err := os.Remove(filepath.Join(s.shims, "guard")); err != nil {
		t.Fatal(err)
	}
	if _, stderr := s.login("true"); !strings.HasPrefix(stderr, "guard: restored "+s.shims+"/guard (fetched from file://"+dist+"/") {
		t.Errorf("the login shell did not restore guard from the archive; its stderr:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(s.shims, "guard")); err != nil {
		t.Errorf("guard is still gone: %v", err)
	}
}

// TestInstallRefuses: a tampered archive, a machine no release is built
// for, and no network each stop install.sh with a clear line and exit 1
// before anything is unpacked, run or written.
func TestInstallRefuses(t *testing.T) {
	t.Parallel() // each in its own sandbox: together they take the longest one's time, not the sum (docs/contributing.md)
	dist := makeDist(t)
	name := filepath.Join(dist, ArchiveName(testVersion, runtime.GOARCH))
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
	defer srv.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // a port nothing listens on: no network
	// A server that fails for a while: curl retries (a 503 is a transient
	// error to it) and says so on every retry; install.sh says it once.
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer busy.Close()

	for _, c := range []struct {
		name, want string
		args       []string
		uname      string
	}{
		{"tampered over http", "but checksums.txt says", []string{"--from", srv.URL}, ""},
		{"tampered file", "but checksums.txt says", []string{"--archive", name}, ""},
		{"no network", "could not download " + gone.URL + "/checksums.txt", []string{"--from", gone.URL}, ""},
		{"a server that keeps failing", "could not download " + busy.URL + "/checksums.txt (", []string{"--from", busy.URL}, ""},
		{"a machine with no release", "built for linux amd64 and arm64, not riscv64", []string{"--from", srv.URL}, "riscv64"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			s := newSandbox(t)
			if c.uname != "" {
				fake := "#!/bin/sh\ncase $1 in -m) echo " + c.uname + " ;; *) echo Linux ;; esac\n"
				os.Remove(filepath.Join(s.bin, "uname"))
				if err := os.WriteFile(filepath.Join(s.bin, "uname"), []byte(fake), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			code, out := s.install(c.args...)
			if code != 1 || !strings.Contains(out, c.want) || !strings.Contains(out, "nothing was installed") {
				t.Errorf("install.sh %v exited %d, want 1 and %q:\n%s", c.args, code, c.want, out)
			}
			// What install.sh says is its own lines, the cause inside its
			// one line: not curl's retries and error before it.
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(line, "install.sh: ") {
					t.Errorf("install.sh %v printed a line not its own: %q", c.args, line)
				}
			}
			s.untouched()
		})
	}
}

// TestInstallFromLatest: installed from the release page's latest/download
// folder, guard records the version's own URL, which keeps naming the
// same archive after a newer release.
func TestInstallFromLatest(t *testing.T) {
	t.Parallel() // each in its own sandbox: together they take the longest one's time, not the sum (docs/contributing.md)
	dist := makeDist(t)
	mux := http.NewServeMux()
	mux.Handle("/releases/latest/download/", http.StripPrefix("/releases/latest/download/", http.FileServer(http.Dir(dist))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s := newSandbox(t)
	code, out := s.install("--from", srv.URL+"/releases/latest/download", "--no-rc")
	if code != 0 {
		t.Fatalf("install.sh exited %d:\n%s", code, out)
	}
	want := srv.URL + "/releases/download/v" + testVersion + "/" + ArchiveName(testVersion, runtime.GOARCH)
	if got := readMarker(t, s); !strings.Contains(got, "release ") || !strings.HasSuffix(strings.TrimSpace(got), " "+want) {
		t.Errorf("install marker %q does not record %s", got, want)
	}
}

// readMarker is guard's install marker in the sandbox's state folder.
func readMarker(t *testing.T, s *sandbox) string {
	t.Helper()
	b, err := os.ReadFile(state.Layout{Dir: filepath.Join(filepath.Dir(s.home), "state")}.Installed())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInstallerDownloadsGiveUp: every download install.sh makes gives up on
// a server that accepts and then stalls (curl's low-speed limit; wget's read
// timeout with a bounded number of tries), where it used to wait forever.
func TestInstallerDownloadsGiveUp(t *testing.T) {
	script, err := os.ReadFile(filepath.Join(repoRoot(t), "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range strings.Split(string(script), "\n") {
		for _, tool := range []struct{ cmd, flags string }{
			{"then curl -", "--connect-timeout --speed-limit --speed-time"},
			{"then wget -", "-T -t"},
		} {
			if !strings.Contains(line, tool.cmd) {
				continue
			}
			checked++
			for _, flag := range strings.Fields(tool.flags) {
				if !strings.Contains(line, " "+flag+" ") {
					t.Errorf("install.sh runs %s without %s: %s", strings.TrimPrefix(strings.TrimSuffix(tool.cmd, " -"), "then "), flag, strings.TrimSpace(line))
				}
			}
		}
	}
	if checked != 2 {
		t.Fatalf("found %d curl and wget lines in install.sh, want 2", checked)
	}
}
