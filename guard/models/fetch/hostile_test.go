package fetch_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
)

// What a hostile neighbour plants beside a model must never be followed,
// extended, truncated or renamed into place.

func TestPlantedPartialLinkIsNotFollowed(t *testing.T) {
	data := guardtest.GGUF(200_000)
	for _, tt := range []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
	}{
		{"range honoured", func(w http.ResponseWriter, r *http.Request) { content(w, r, data) }},
		{"range ignored", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { tt.serve(w, r) })
			victim := filepath.Join(t.TempDir(), "victim")
			keep := "GGUF\x03\x00\x00\x00 the victim's own bytes"
			guardtest.WriteFile(t, victim, keep, 0o644)
			r := request(t, srv.URL)
			r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
			if err := os.Symlink(victim, r.Dest+".partial"); err != nil {
				t.Fatal(err)
			}
			if _, err := fetch.Fetch(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			mustFile(t, victim, []byte(keep))
			mustRegular(t, r.Dest)
			mustFile(t, r.Dest, data)
		})
	}
}

func TestPlantedMetaLinkIsNotFollowed(t *testing.T) {
	data := guardtest.GGUF(300_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	// A fresh download writes the sidecar; a resumed one reads it first.
	for _, tt := range []struct {
		name, target string
		partial      bool
	}{
		{"fresh, link to a victim", "victim", false},
		{"resumed, link to a victim", "victim", true},
		{"resumed, link to /dev/zero", "/dev/zero", true},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			victim := tt.target
			if !filepath.IsAbs(victim) {
				victim = filepath.Join(t.TempDir(), "victim")
				guardtest.WriteFile(t, victim, "keep me\n", 0o644)
			}
			r := request(t, srv.URL)
			r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
			if tt.partial {
				guardtest.WriteFile(t, r.Dest+".partial", string(data[:50_000]), 0o644)
			}
			if err := os.Symlink(victim, r.Dest+".partial.meta"); err != nil {
				t.Fatal(err)
			}
			if _, err := fetch.Fetch(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if victim != "/dev/zero" {
				mustFile(t, victim, []byte("keep me\n"))
			}
			mustFile(t, r.Dest, data)
			mustNotExist(t, r.Dest+".partial", r.Dest+".partial.meta")
		})
	}
}

// A partial that is not a plain file of guard's own (a FIFO, a hard link
// to someone's file, another user's file) is removed and the download
// starts over; nothing that was there is read or written.
func TestUntrustedPartialIsReplaced(t *testing.T) {
	data := guardtest.GGUF(100_000)
	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, partial string)
		root  bool
	}{
		{"fifo", func(t *testing.T, partial string) {
			if err := syscall.Mkfifo(partial, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"hard link", func(t *testing.T, partial string) {
			victim := filepath.Join(filepath.Dir(partial), "victim")
			guardtest.WriteFile(t, victim, string(data[:1000]), 0o644)
			if err := os.Link(victim, partial); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { mustFile(t, victim, data[:1000]) })
		}, false},
		{"another user's", func(t *testing.T, partial string) {
			guardtest.WriteFile(t, partial, string(data[:1000]), 0o666)
			if err := os.Chown(partial, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("giving a file away needs root")
			}
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
			r := request(t, srv.URL)
			r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
			var said strings.Builder
			r.Progress = &said
			tt.plant(t, r.Dest+".partial")
			res, err := fetch.Fetch(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			mustFile(t, r.Dest, data)
			if res.Resumed || srv.ranges.Load() != 0 {
				t.Fatalf("resumed from a planted partial: %+v, %d range requests", res, srv.ranges.Load())
			}
			if !strings.Contains(said.String(), "removed") {
				t.Errorf("nothing said about the removed partial: %q", said.String())
			}
			fi, _ := os.Stat(r.Dest)
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Geteuid()) || st.Nlink != 1 {
				t.Errorf("model owned by %d with %d links", st.Uid, st.Nlink)
			}
		})
	}
}

// TestUnreadablePartial runs as an unprivileged user (nobody): a partial
// of mode 000 in its own folder is removed and the download restarts; in a
// folder it cannot write, the message names the partial file and why,
// not the folder's permissions in general.
func TestUnreadablePartial(t *testing.T) {
	data := guardtest.GGUF(50_000)
	if dir := os.Getenv("FETCH_TEST_NOBODY_DIR"); dir != "" {
		r := fetch.Request{URLs: []string{os.Getenv("FETCH_TEST_URL")}, Dest: filepath.Join(dir, "m.gguf"), Size: int64(len(data)), SHA256: guardtest.Sum(data), Retries: -1}
		_, err := fetch.Fetch(context.Background(), r)
		if err != nil {
			io.WriteString(os.Stderr, "FETCH ERROR: "+err.Error()+"\n")
			os.Exit(3)
		}
		return
	}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	own, exe := nobodyDir(t), nobodyExe(t)
	partial := filepath.Join(own, "m.gguf.partial")
	guardtest.WriteFile(t, partial, "GGUF\x03\x00\x00\x00 stale", 0o000)
	os.Chown(partial, 65534, 65534)
	if out, err := asNobody(exe, "TestUnreadablePartial", "FETCH_TEST_NOBODY_DIR="+own, "FETCH_TEST_URL="+srv.URL); err != nil {
		t.Fatalf("own folder: %v\n%s", err, out)
	}
	mustFile(t, filepath.Join(own, "m.gguf"), data)

	// A folder nobody may not write, holding a partial nobody may not
	// read: say which file and why, and leave it.
	theirs := nobodyDir(t)
	os.Chown(theirs, 0, 0)
	partial = filepath.Join(theirs, "m.gguf.partial")
	guardtest.WriteFile(t, partial, "GGUF\x03\x00\x00\x00 stale", 0o600)
	out, err := asNobody(exe, "TestUnreadablePartial", "FETCH_TEST_NOBODY_DIR="+theirs, "FETCH_TEST_URL="+srv.URL)
	if err == nil {
		t.Fatalf("downloaded into a folder it cannot write\n%s", out)
	}
	for _, want := range []string{partial, "cannot remove it", "permission denied"} {
		if !strings.Contains(out, want) {
			t.Errorf("message lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Lstat(partial); err != nil {
		t.Errorf("the other user's partial is gone: %v", err)
	}
}

// nobodyDir is a fresh folder owned by nobody that nobody can reach.
func nobodyDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("playing another user needs root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
	dir, err := os.MkdirTemp("", "guard-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return dir
}

// nobodyExe is a copy of this test binary that nobody may run (go test
// keeps its binary in a folder only root can enter).
func nobodyExe(t *testing.T) string {
	t.Helper()
	dir := nobodyDir(t)
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "fetch.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// asNobody runs one test of exe as nobody with env added.
func asNobody(exe, test string, env ...string) (string, error) {
	cmd := exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", exe, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append([]string{"HOME=/nonexistent", "PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRegular(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() {
		t.Fatalf("%s is %v, want a regular file", path, fi.Mode())
	}
}

// A partial left by an earlier run is resumed without its first bytes
// ever passing through the download: the finished file's header is
// checked all the same, pinned or not.
func TestResumedPartialHeaderChecked(t *testing.T) {
	data := guardtest.GGUF(200_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL)
	r.Size = int64(len(data)) // no sha256: only size and header can tell
	junk := strings.Repeat("\x8f random bytes, not a model ", 8000)
	guardtest.WriteFile(t, r.Dest+".partial", junk[:100_000], 0o644)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if srv.requests.Load() != 1 || srv.ranges.Load() != 0 {
		t.Fatalf("%d requests (%d ranges), want 1 fresh start", srv.requests.Load(), srv.ranges.Load())
	}

	// A complete partial needs no request, and is checked too.
	r = request(t, srv.URL)
	r.Size = int64(len(data))
	guardtest.WriteFile(t, r.Dest+".partial", junk[:len(data)], 0o644)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)

	// The check is of the bytes on disk at the end: another process that
	// overwrites the start of the partial while the rest downloads is
	// caught, and nothing is renamed into place.
	dest := filepath.Join(t.TempDir(), "m.gguf")
	tamper := serve(t, func(w http.ResponseWriter, req *http.Request, n int64, c *counter) {
		os.WriteFile(dest+".partial", []byte("<!DOCTYPE html>"), 0o644) // keeps the size: writes at 0, no truncation
		content(w, req, data)
	})
	r = request(t, tamper.URL)
	r.Dest, r.Size = dest, int64(len(data))
	guardtest.WriteFile(t, dest+".partial", string(data[:100_000]), 0o644)
	_, err := fetch.Fetch(context.Background(), r)
	var be *fetch.BodyError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "HTML") {
		t.Fatalf("err = %v, want a *BodyError about an HTML page", err)
	}
	mustNotExist(t, dest, dest+".partial")
}

// Messages name the byte a resume asked for, not the 0 the partial was
// reset to afterwards.
func TestResumeMessagesNameTheOffset(t *testing.T) {
	data := guardtest.GGUF(100_000)
	for _, tt := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		want   string
	}{
		{"416", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes */"+strconv.Itoa(len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		}, "refused to resume from byte 50000 (416)"},
		{"wrong place", func(w http.ResponseWriter) {
			w.Header().Set("Content-Range", "bytes 10-99999/100000")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[10:])
		}, "for a request from byte 50000"},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
				if r.Header.Get("Range") != "" {
					tt.answer(w)
					return
				}
				content(w, r, data)
			})
			r := request(t, srv.URL)
			r.Size = int64(len(data))
			guardtest.WriteFile(t, r.Dest+".partial", string(data[:50_000]), 0o644)
			var said []string
			r.OnRetry = func(u string, attempt int, err error) { said = append(said, err.Error()) }
			if _, err := fetch.Fetch(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if len(said) != 1 || !strings.Contains(said[0], tt.want) {
				t.Fatalf("retry messages %q, want one saying %q", said, tt.want)
			}
		})
	}
}

// The stall rule is a minimum byte rate over a window (curl's
// --speed-limit/--speed-time): a trickle is as dead as silence, and a
// server that accepts and never answers is dead from the request on.
func TestSlowerThanMinimumRateStalls(t *testing.T) {
	data := guardtest.GGUF(100_000)
	for _, tt := range []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
	}{
		{"trickle", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Write(data[:100])
			for i := 100; i < len(data); i++ {
				w.Write(data[i : i+1])
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond): // 50 bytes/s
				}
			}
		}},
		{"never answers", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { tt.serve(w, r) })
			r := request(t, srv.URL)
			r.Size, r.Retries = int64(len(data)), -1
			r.MinRate, r.RateWindow = 1000, 200*time.Millisecond
			// Only a bound so that the old rule fails instead of hanging.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := fetch.Fetch(ctx, r)
			var se *fetch.StallError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), "under the minimum of 1000 B/s") {
				t.Fatalf("err = %v, want a *StallError", err)
			}
		})
	}
}

// offlineClient fails every dial the way Go reports a lookup that found
// no host, or a network that is not there, and counts the dials.
func offlineClient(err error, dials *atomic.Int64) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		},
	}}
}

// Offline (no DNS, no route) is one try per url, not six, and says so.
func TestOfflineFailsFastAndOnce(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"no such host", &net.DNSError{Err: "no such host", Name: "huggingface.co", IsNotFound: true}},
		{"network unreachable", os.NewSyscallError("connect", syscall.ENETUNREACH)},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			var dials atomic.Int64
			r := request(t, "https://huggingface.co/a/resolve/main/m.gguf", "https://mirror.example/m.gguf")
			r.Client = offlineClient(tt.err, &dials)
			_, err := fetch.Fetch(context.Background(), r)
			var se *fetch.SourcesError
			if !errors.As(err, &se) || !se.Offline() || !strings.Contains(err.Error(), "offline?") {
				t.Fatalf("err = %v, want every url offline", err)
			}
			if n := dials.Load(); n != 2 {
				t.Fatalf("%d dials, want one per url", n)
			}
		})
	}
}
