package scripttest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// A download server that misbehaves on purpose, one per script, at
// $SERVER. A path is /KIND/SIZE/NAME: SIZE bytes of the same GGUF pattern
// as the gguf command (so `gguf` makes the expected file), served the way
// KIND says:
//
//	ok         the file; Range and If-Range honoured (strong ETag)
//	404        404 with Hugging Face's body "Entry not found"
//	404once    404 on the first GET, then ok
//	html       200 text/html login page
//	gated      401 with X-Error-Code: GatedRepo
//	429once    429 with Retry-After: 1 on the first GET, then ok
//	500once    500 on the first GET, then ok
//	drop       the first GET breaks the connection half way, then ok
//	norange    the first GET breaks half way, then 200 with the whole file whatever the Range
//	stall      the first GET sends half, goes quiet for 1.5 s (inside guard's 30 s rate window,
//	           which a script cannot wait out), then breaks; then ok
//	wronghash  the right size and header, other bytes
//	slow       the first GET sends 5/8 at once, then 8 KiB every 100 ms; then ok
//	lfs        200 with a Git-LFS pointer
//	redirect   302 to /ok/SIZE/NAME, as huggingface.co/.../resolve/ sends to its CDN
//	hf         HEAD and GET: 302 to /ok/SIZE/NAME carrying X-Linked-Size SIZE and
//	           X-Linked-Etag (the sha256 of the file /ok serves), as Hugging Face does
//	hfsize     the same, declaring SIZE+1 bytes
//	hflies     the same, declaring the sha256 of other bytes than it serves
//
// and /work/PATH serves $WORK/PATH as a static file server does (a
// fleet's exported stash).
//
// Every GET is counted per path and appended to $WORK/requests.log as
// "GET PATH range=R auth=A" (R and A are "-" when absent), for grep; a HEAD
// is logged as "HEAD PATH auth=A", not counted. Only the hf kinds answer a
// HEAD (the others say 405, as a server that declares nothing may).

type serverKey struct{}

// testKey holds the script's testing.T, so a command can skip the script.
type testKey struct{}

type modelServer struct {
	logPath string
	workDir string
	quit    chan struct{} // closed when the script ends: every pause returns

	mu   sync.Mutex
	gets map[string]int
	sent map[string]int64
}

func startModelServer(e *testscript.Env) error {
	s := &modelServer{
		logPath: filepath.Join(e.WorkDir, "requests.log"),
		workDir: e.WorkDir,
		quit:    make(chan struct{}),
		gets:    map[string]int{},
		sent:    map[string]int64{},
	}
	srv := httptest.NewServer(s)
	e.Values[serverKey{}] = s
	e.Values[testKey{}] = e.T()
	e.Setenv("SERVER", srv.URL)
	e.Defer(func() {
		close(s.quit)
		srv.Close()
	})
	return nil
}

func (s *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	declares := strings.HasPrefix(parts[0], "hf")
	if r.Method == http.MethodHead && declares {
		s.log(fmt.Sprintf("HEAD %s auth=%s\n", r.URL.Path, orDash(r.Header.Get("Authorization"))))
	} else if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	first := r.Method == http.MethodGet && s.count(r)
	if parts[0] == "work" {
		http.StripPrefix("/work", http.FileServer(http.Dir(s.workDir))).ServeHTTP(w, r)
		return
	}
	size := 0
	if len(parts) >= 2 {
		size, _ = strconv.Atoi(parts[1])
	}
	if size < 8 || size > 64<<20 {
		http.Error(w, "want /KIND/SIZE/NAME", http.StatusBadRequest)
		return
	}
	cw := &countingWriter{ResponseWriter: w, s: s, path: r.URL.Path}
	body := guardtest.GGUF(size) // what the gguf command writes
	switch kind := parts[0]; {
	case kind == "ok",
		kind == "404once" && !first, kind == "429once" && !first, kind == "500once" && !first,
		kind == "drop" && !first, kind == "stall" && !first, kind == "slow" && !first:
		serveFile(cw, r, body)
	case kind == "404", kind == "404once":
		w.Header().Set("X-Error-Code", "EntryNotFound")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(cw, "Entry not found")
	case kind == "html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(cw, "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>please log in</body></html>\n")
	case kind == "gated":
		w.Header().Set("X-Error-Code", "GatedRepo")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(cw, "Access to model is restricted. You must have access to it and be authenticated to access it. Please log in.")
	case kind == "429once":
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(cw, "rate limited")
	case kind == "500once":
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(cw, "internal error")
	case kind == "drop", kind == "norange" && first:
		s.breakAfter(cw, body, len(body)/2, 0)
	case kind == "norange":
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		cw.Write(body)
	case kind == "stall":
		s.breakAfter(cw, body, len(body)/2, 1500*time.Millisecond)
	case kind == "wronghash":
		body[len(body)-1] ^= 0xff
		serveFile(cw, r, body)
	case kind == "slow":
		s.trickle(cw, r, body)
	case kind == "redirect":
		http.Redirect(w, r, "/ok/"+strings.Join(parts[1:], "/"), http.StatusFound)
	case declares:
		size, sum := len(body), guardtest.Sum(body)
		switch kind {
		case "hfsize":
			size++
		case "hflies":
			sum = guardtest.Sum(append(body, 'x'))
		}
		w.Header().Set("X-Linked-Size", strconv.Itoa(size))
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		http.Redirect(w, r, "/ok/"+strings.Join(parts[1:], "/"), http.StatusFound)
	case kind == "lfs":
		io.WriteString(cw, "version https://git-lfs.github.com/spec/v1\noid sha256:"+strings.Repeat("ab", 32)+"\nsize "+strconv.Itoa(size)+"\n")
	default:
		http.Error(w, "unknown kind "+kind, http.StatusBadRequest)
	}
}

// count records a GET and reports whether it is the first of its path.
func (s *modelServer) count(r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets[r.URL.Path]++
	s.log(fmt.Sprintf("GET %s range=%s auth=%s\n", r.URL.Path, orDash(r.Header.Get("Range")), orDash(r.Header.Get("Authorization"))))
	return s.gets[r.URL.Path] == 1
}

// log appends line to requests.log.
func (s *modelServer) log(line string) {
	if f, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
		f.WriteString(line)
		f.Close()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// serveFile serves body with Range support and a strong validator, as the
// Hugging Face CDN does.
func serveFile(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("ETag", `"`+guardtest.Sum(body)+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// breakAfter announces the whole body, sends n bytes, waits pause and
// breaks the connection.
func (s *modelServer) breakAfter(w *countingWriter, body []byte, n int, pause time.Duration) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body[:n])
	w.Flush()
	s.sleep(pause, nil)
	panic(http.ErrAbortHandler) // net/http closes the connection without a log line
}

// trickle sends 5/8 of body at once (past fetch's first 512 KiB flush for a
// 1 MiB model, so a kill leaves a partial file), then 8 KiB every 100 ms.
func (s *modelServer) trickle(w *countingWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	at := len(body) * 5 / 8
	w.Write(body[:at])
	w.Flush()
	for at < len(body) {
		if !s.sleep(100*time.Millisecond, r) {
			return
		}
		end := min(len(body), at+8<<10)
		if _, err := w.Write(body[at:end]); err != nil {
			return
		}
		w.Flush()
		at = end
	}
}

// sleep waits d, or less when the client leaves or the script ends; it
// reports whether the whole wait passed.
func (s *modelServer) sleep(d time.Duration, r *http.Request) bool {
	var gone <-chan struct{}
	if r != nil {
		gone = r.Context().Done()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-gone:
	case <-s.quit:
	}
	return false
}

// countingWriter counts the body bytes sent per path.
type countingWriter struct {
	http.ResponseWriter
	s    *modelServer
	path string
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.s.mu.Lock()
	c.s.sent[c.path] += int64(n)
	c.s.mu.Unlock()
	return n, err
}

func (c *countingWriter) Flush() { http.NewResponseController(c.ResponseWriter).Flush() }

func server(ts *testscript.TestScript) *modelServer {
	s, ok := ts.Value(serverKey{}).(*modelServer)
	if !ok {
		ts.Fatalf("no download server")
	}
	return s
}

// served PATH N: the server answered exactly N GETs of PATH.
func cmdServed(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: served PATH N")
	}
	want, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("served: bad count %q", args[1])
	}
	s := server(ts)
	s.mu.Lock()
	got := s.gets[args[0]]
	s.mu.Unlock()
	if got != want {
		ts.Fatalf("%s served %d times, want %d", args[0], got, want)
	}
}

// sentbytes PATH MAX: the server sent at most MAX body bytes for PATH in
// all (with !, more than MAX).
func cmdSentBytes(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: sentbytes PATH MAX")
	}
	limit, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("sentbytes: bad limit %q", args[1])
	}
	s := server(ts)
	s.mu.Lock()
	got := s.sent[args[0]]
	s.mu.Unlock()
	if (got > limit) != neg {
		ts.Fatalf("%s: %d bytes sent, limit %d (negated %v)", args[0], got, limit, neg)
	}
	ts.Logf("%s: %d bytes sent", args[0], got)
}

// sha256env FILE VAR: set VAR to FILE's sha256 (for a manifest made by
// cpenv that pins it).
func cmdSHA256Env(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: sha256env FILE VAR")
	}
	ts.Setenv(args[1], guardtest.Sum([]byte(ts.ReadFile(args[0]))))
}

// waitsize FILE MIN [SECONDS]: wait until FILE holds at least MIN bytes
// (default 10 s).
func cmdWaitSize(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || neg {
		ts.Fatalf("usage: waitsize FILE MIN [SECONDS]")
	}
	min, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		ts.Fatalf("waitsize: bad size %q", args[1])
	}
	limit := 10 * time.Second
	if len(args) > 2 {
		n, _ := strconv.Atoi(args[2])
		limit = time.Duration(n) * time.Second
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(ts.MkAbs(args[0])); err == nil && fi.Size() >= min {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ts.Fatalf("%s did not reach %d bytes within %s", args[0], min, limit)
}

// tmpfs DIR SIZE: mount a tmpfs of SIZE (e.g. 256k) on DIR, a disk that
// fills up, until the script ends. The script is skipped when mounting is
// not allowed (not root, or a sandbox that refuses mounts).
func cmdTmpfs(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: tmpfs DIR SIZE")
	}
	t, _ := ts.Value(testKey{}).(testscript.T)
	skip := func(why string) {
		if t == nil {
			ts.Fatalf("%s", why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		skip("mounting a small tmpfs needs root")
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o755))
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+args[1]); err != nil {
		skip(fmt.Sprintf("mount tmpfs refused: %v", err))
	}
	ts.Defer(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH) // never leave a mount behind
		}
	})
}
