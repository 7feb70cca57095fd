package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// A mirror that sends guard's copy at 2 KiB a second is above curl's
// low-speed limit (1 KB/s), so only curl's 600 s cap would end the fetch:
// a shell's start must not wait for it. With GUARD_RESTORE_WAIT=1 the login
// shell starts after about a second, saying in one line that the restore
// goes on in the background; the restore goes on (the server sees it) and,
// once the server stops, ends on its own: its lock is free, its failure
// stamped for the next shell, nothing of it left running. The verdict rests
// on no margin: the body would take well over an hour at that rate.
func TestRestoreAtShellStartDoesNotWaitForASlowMirror(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash: the PATH block and the restore script are run by bash")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl: the restore script fetches over http with curl")
	}
	for _, tool := range []string{"timeout", "mkfifo", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the restore script's wait needs it (coreutils, util-linux)", tool)
		}
	}
	const size = 10 << 20 // 85 minutes at 2 KiB a second
	stop := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte{'g'}, 2048)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return // the body ends short: curl fails the fetch
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	}))
	stopped := false
	stopServer := func() {
		if !stopped {
			stopped = true
			close(stop)
		}
	}
	t.Cleanup(func() { stopServer(); srv.Close() })

	e := newFaultEnv(t, `
[tools.hello]
path = "$BIN/hello"

[self]
urls = ["`+srv.URL+`/guard"]
sha256 = "`+strings.Repeat("ab", 32)+`"
`)
	e.Tool("hello", `echo "hello: $*"`)
	if r := e.RunPath(e.Guard, "install"); r.Code != 0 {
		t.Fatalf("guard install: %s", r)
	}
	if err := os.Remove(filepath.Join(e.ShimDir, "guard")); err != nil {
		t.Fatal(err)
	}

	shell := exec.Command(bash, "-lc", "echo started")
	shell.Env = append(e.Env, "GUARD_RESTORE_WAIT=1")
	shell.Dir = e.Dir
	shell.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stdout, stderr bytes.Buffer
	shell.Stdout, shell.Stderr = &stdout, &stderr
	shell.WaitDelay = time.Second
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	sid := shell.Process.Pid
	t.Cleanup(func() { guardtest.KillSession(sid) })
	done := make(chan error, 1)
	go func() { done <- shell.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("bash -lc: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		guardtest.KillSession(sid)
		t.Fatalf("the login shell was still held by the restore 2 minutes after it started (GUARD_RESTORE_WAIT=1); its stderr:\n%s", stderr.String())
	}
	if stdout.String() != "started\n" {
		t.Errorf("the shell's command printed %q, want %q", stdout.String(), "started\n")
	}
	log := filepath.Join(e.StateDir, "restore.log")
	want := "guard: restoring " + e.ShimDir + "/guard takes more than 1s; it goes on in the background (its output is in " + log + "), and calls before it is back run without guard\n"
	if stderr.String() != want {
		t.Errorf("the shell's stderr is not the one line\n%q; it is\n%q", want, stderr.String())
	}

	// The restore goes on without the shell: it reaches the mirror.
	deadline := time.Now().Add(time.Minute)
	for requests.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the restore never asked the mirror for guard's copy")
		}
		time.Sleep(20 * time.Millisecond)
	}
	lock := flock.New(filepath.Join(e.StateDir, "locks", "restore.lock"))
	if ok, err := lock.TryLock(); err != nil || ok {
		_ = lock.Unlock()
		t.Fatalf("the restore the shell left in the background does not hold the restore lock (free: %v, %v)", ok, err)
	}

	// The mirror stops: the fetch fails, the restore ends and says so to
	// the next shell.
	stopServer()
	deadline = time.Now().Add(time.Minute)
	for {
		ok, err := lock.TryLock()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			_ = lock.Unlock()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background restore still holds its lock a minute after the mirror stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := guardtest.WaitProcsGone(func() []guardtest.Proc { return guardtest.SessionProcs(sid) }, 10*time.Second); len(left) > 0 {
		t.Errorf("the background restore ended, and processes of the shell's session live on: %s", guardtest.DescribeProcs(left))
	}
	if _, err := os.Stat(filepath.Join(e.StateDir, "locks", "restore.failed")); err != nil {
		t.Errorf("the failed background restore left no failure stamp for the next shell: %v", err)
	}
	b, _ := os.ReadFile(log)
	if !regexp.MustCompile(`(?m)^guard: .*fetching it from `+regexp.QuoteMeta(srv.URL)+`/guard$`).Match(b) ||
		!strings.Contains(string(b), "could not be restored") {
		t.Errorf("the restore log does not tell the fetch and its failure:\n%s", b)
	}
	next := exec.Command(bash, "-lc", "true")
	next.Env = e.Env
	out, _ := next.CombinedOutput()
	if !strings.Contains(string(out), "the last restore failed less than 10 minutes ago") {
		t.Errorf("the next shell does not say the restore failed: %q", out)
	}
}
