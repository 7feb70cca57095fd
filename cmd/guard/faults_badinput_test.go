package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/guardtest"
)

// The bad-input table: each case gives the real guard (through its shim
// links, against a misbehaving local server and fake #!/bin/sh tools) one
// kind of bad input and checks the exit status, the message on stderr and
// that guard never crashes.

func init() {
	if filepath.Base(os.Args[0]) == "fault-mount" {
		os.Exit(faultMount(os.Args[1:]))
	}
}

// faultMount is this test binary run as fault-mount inside `unshare -m`:
// fault-mount tmpfs|ro|bind DIR [SIZE|SRC] -- PROG ARGS... mounts a small
// tmpfs (a full disk), a read-only bind of DIR, or SRC bound over DIR (a
// copy standing in for it), in a mount namespace of its own so nothing
// outlives the call, and execs PROG.
func faultMount(args []string) int {
	sep := -1
	for i, a := range args {
		if a == "--" {
			sep = i
			break
		}
	}
	if sep < 2 || sep == len(args)-1 {
		fmt.Fprintln(os.Stderr, "usage: fault-mount tmpfs|ro|bind DIR [SIZE|SRC] -- PROG ARGS...")
		return 2
	}
	mode, dir, prog := args[0], args[1], args[sep+1:]
	var err error
	switch mode {
	case "tmpfs":
		size := "64k"
		if sep > 2 {
			size = args[2]
		}
		err = syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size)
	case "ro":
		if err = syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err == nil {
			err = syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, "")
		}
	case "bind":
		if sep != 3 {
			err = fmt.Errorf("bind needs the source folder")
			break
		}
		err = syscall.Mount(args[2], dir, "", syscall.MS_BIND, "")
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault-mount:", err)
		return 2
	}
	path, err := exec.LookPath(prog[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fault-mount:", err)
		return 2
	}
	err = syscall.Exec(path, prog, os.Environ())
	fmt.Fprintln(os.Stderr, "fault-mount:", err)
	return 2
}

// canMount reports whether calls can run in a mount namespace of their own
// with a tmpfs (root and unshare are needed).
func canMount(t *testing.T) bool {
	if os.Geteuid() != 0 {
		return false
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return false
	}
	dir := t.TempDir()
	err := exec.Command("unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", dir).Run()
	return err == nil
}

// underMount runs the shim call name inside fault-mount MODE DIR [ARG]
// (ARG: a tmpfs's size, a bind's source).
func (e *faultEnv) underMount(mode, dir, arg, name string, args ...string) faultResult {
	self, _ := os.Readlink(e.Guard)
	helper := filepath.Join(e.Dir, "self", "fault-mount")
	if _, err := os.Lstat(helper); err != nil {
		if err := os.Symlink(self, helper); err != nil {
			e.t.Fatal(err)
		}
	}
	argv := []string{"-m", "--propagation", "private", helper, mode, dir}
	if arg != "" {
		argv = append(argv, arg)
	}
	argv = append(argv, "--", filepath.Join(e.ShimDir, name))
	unshare, _ := exec.LookPath("unshare")
	return e.RunPath(unshare, append(argv, args...)...)
}

// badServer misbehaves differently at each path.
func badServer(t *testing.T, model []byte) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!doctype html><html><head><title>Sign in</title></head><body>please sign in</body></html>")
		case "/404":
			http.Error(w, "Entry not found", http.StatusNotFound)
		case "/gated":
			w.Header().Set("X-Error-Code", "GatedRepo")
			http.Error(w, "Access to model org/m is restricted. You must have access to it and be authenticated.", http.StatusUnauthorized)
		case "/429":
			w.Header().Set("Retry-After", "120")
			http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
		case "/500":
			http.Error(w, "Internal Error", http.StatusInternalServerError)
		case "/lfs":
			fmt.Fprintf(w, "version https://git-lfs.github.com/spec/v1\noid sha256:%064x\nsize %d\n", 1, len(model))
		case "/drop":
			// Promise the whole file, send a third, cut the connection.
			w.Header().Set("Content-Length", strconv.Itoa(len(model)))
			w.WriteHeader(http.StatusOK)
			w.Write(model[:len(model)/3])
			w.(http.Flusher).Flush()
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					tc.SetLinger(0) // a reset, as a dropped link looks
				}
				conn.Close()
			}
		case "/norange":
			// Ignores Range: always the whole file with a 200.
			w.Header().Set("Content-Length", strconv.Itoa(len(model)))
			w.Write(model)
		case "/tohttp":
			// Off this machine over plain http (TEST-NET-1: never reached).
			http.Redirect(w, r, "http://192.0.2.1/m.gguf", http.StatusFound)
		case "/silent":
			<-r.Context().Done() // accepts, never answers
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/short":
			// Another, smaller file, announced as such.
			w.Header().Set("Content-Length", strconv.Itoa(len(model)/2))
			w.Write(model[:len(model)/2])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

type badCase struct {
	name   string
	root   bool                                 // needs a mount namespace
	setup  func(*testing.T, *faultEnv) []string // returns the call: shim name and args
	env    []string
	status int
	stderr string // regexp every line of which... any match in stderr
	stdout string // exact stdout, when set
	check  func(*testing.T, *faultEnv, faultResult)
}

const badModelSize = 64 << 10

func TestBadInput(t *testing.T) {
	t.Parallel()
	model := guardtest.GGUF(badModelSize)
	srv := badServer(t, model)
	mounts := canMount(t)

	// modelCall makes the manifest's only model come from path on the
	// bad server and returns a llama-completion call that needs it.
	modelCall := func(path string) func(*testing.T, *faultEnv) []string {
		return func(t *testing.T, e *faultEnv) []string {
			e.WriteManifest(badManifest(fmt.Sprintf(`size = %d
urls = [%q]`, badModelSize, srv.URL+path)))
			return []string{"llama-completion", "-m", filepath.Join(e.Home, "models", "m.gguf"), "-p", "hi", "-n", "4"}
		}
	}
	manifestText := func(text string) func(*testing.T, *faultEnv) []string {
		return func(t *testing.T, e *faultEnv) []string {
			e.WriteManifest(text)
			return []string{"npx", "cowsay"}
		}
	}
	goodModel := func(e *faultEnv) string {
		p := filepath.Join(e.Home, "m.gguf")
		if err := os.WriteFile(p, model, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	cases := []badCase{
		{name: "html body", setup: modelCall("/html"), status: 127,
			stderr: `guard: llama-completion: heal model m\.gguf: download m\.gguf: http://127\.0\.0\.1:\d+/html sent an HTML page`},
		{name: "404 entry not found", setup: modelCall("/404"), status: 127,
			stderr: `/404: 404 not found: the server says "Entry not found": the file does not exist at this url`},
		{name: "401 gated", setup: modelCall("/gated"), status: 127,
			stderr: `/gated: 401 unauthorized: the repository is gated: accept its terms on huggingface\.co, then set HF_TOKEN`},
		{name: "429 rate limited", setup: modelCall("/429"), status: 127,
			stderr: `/429: 429 too many requests: rate limited.*retrying would pass the heal time limit`},
		{name: "500 server error", setup: modelCall("/500"), status: 127,
			stderr: `/500: 500 internal server error`},
		{name: "git-lfs pointer", setup: modelCall("/lfs"), status: 127,
			stderr: `/lfs sent a Git-LFS pointer`},
		// The retries' jittered back-off decides whether the next one would
		// pass [budget] heal (the download error) or the time runs out while
		// retrying (the timeout, naming the failure): both name the drop.
		{name: "connection drop", setup: modelCall("/drop"), status: 127,
			stderr: `heal model m\.gguf: (download m\.gguf: |timed out after .*; it was retrying after: ).*(reset|closed|unexpected EOF)`,
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if _, err := os.Stat(filepath.Join(e.Home, "models", "m.gguf")); err == nil {
					t.Error("a dropped download left the model in place")
				}
			}},
		{name: "wrong size served", setup: modelCall("/short"), status: 127,
			stderr: `serves a file whose size is \d+, but the manifest says 65536`},
		{name: "redirect to plain http", setup: modelCall("/tohttp"), status: 127,
			stderr: `/tohttp: refused a redirect to plain http http://192\.0\.2\.1/m\.gguf`},
		{name: "redirect loop", setup: modelCall("/loop"), status: 127,
			stderr: `/loop: refused a redirect loop`,
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if n := strings.Count(r.Stderr, "trying again"); n != 0 {
					t.Errorf("a redirect loop was retried %d times", n)
				}
			}},
		{name: "symlink planted at the partial", setup: func(t *testing.T, e *faultEnv) []string {
			call := modelCall("/norange")(t, e)
			victim := filepath.Join(e.Dir, "victim")
			os.WriteFile(victim, []byte("keep me\n"), 0o644)
			os.MkdirAll(filepath.Join(e.Home, "models"), 0o755)
			os.Symlink(victim, filepath.Join(e.Home, "models", "m.gguf.partial"))
			os.Symlink(victim, filepath.Join(e.Home, "models", "m.gguf.partial.meta"))
			return call
		}, status: 0, stdout: fmt.Sprintf("model bytes: %d\n", badModelSize),
			stderr: `guard: removed .*/m\.gguf\.partial: it was a symlink`,
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if b, _ := os.ReadFile(filepath.Join(e.Dir, "victim")); string(b) != "keep me\n" {
					t.Errorf("the planted link was followed: victim now %d bytes", len(b))
				}
				if fi, err := os.Lstat(filepath.Join(e.Home, "models", "m.gguf")); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("the model is not a regular file: %v %v", fi, err)
				}
			}},
		{name: "server never answers", setup: modelCall("/silent"), status: 127,
			stderr: `heal model m\.gguf: timed out after 2(\.\d)?s downloading \(\[budget\] heal = 2s\)`,
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if strings.Contains(r.Stderr, "deadline exceeded") {
					t.Error(`the message says "deadline exceeded", not "timed out"`)
				}
				if fs, _ := filepath.Glob(filepath.Join(e.StateDir, "failures", "*")); len(fs) != 0 {
					t.Errorf("running out of time was remembered as a failure: %v", fs)
				}
			}},
		{name: "one stale mirror of two", setup: func(t *testing.T, e *faultEnv) []string {
			e.WriteManifest(badManifest(fmt.Sprintf("size = %d\nurls = [%q, %q]", badModelSize, srv.URL+"/short", srv.URL+"/norange")))
			return []string{"llama-completion", "-m", filepath.Join(e.Home, "models", "m.gguf"), "-p", "hi", "-n", "4"}
		}, status: 0, stdout: fmt.Sprintf("model bytes: %d\n", badModelSize),
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if fs, _ := filepath.Glob(filepath.Join(e.StateDir, "failures", "*")); len(fs) != 0 {
					t.Errorf("a failure was remembered although the second url served the model: %v", fs)
				}
			}},
		{name: "range ignored", setup: func(t *testing.T, e *faultEnv) []string {
			call := modelCall("/norange")(t, e)
			// A partial from an earlier run: the server answers the resume
			// with the whole file, which must replace it, not append.
			os.MkdirAll(filepath.Join(e.Home, "models"), 0o755)
			os.WriteFile(filepath.Join(e.Home, "models", "m.gguf.partial"), model[:1000], 0o644)
			return call
		}, status: 0, stdout: fmt.Sprintf("model bytes: %d\n", badModelSize),
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				b, _ := os.ReadFile(filepath.Join(e.Home, "models", "m.gguf"))
				if string(b) != string(model) {
					t.Errorf("the model is not the served file (%d bytes)", len(b))
				}
			}},
		{name: "disk full", root: true, setup: func(t *testing.T, e *faultEnv) []string {
			call := modelCall("/norange")(t, e)
			os.MkdirAll(filepath.Join(e.Home, "models"), 0o755)
			return append([]string{"mount:tmpfs:" + filepath.Join(e.Home, "models") + ":32k"}, call...)
		}, status: 127, stderr: `no space left on device in .*/models: the download needs 65536 more bytes .* free some space and heal again`},
		{name: "read-only state dir", root: true, setup: func(t *testing.T, e *faultEnv) []string {
			call := modelCall("/norange")(t, e)
			os.MkdirAll(e.StateDir, 0o755)
			return append([]string{"mount:ro:" + e.StateDir}, call...)
		}, status: 0, stderr: `heal model m\.gguf: lock .*read-only file system.*\n(guard: .*\n)*guard: running the call without the heal: guard cannot write its state folder`},
		{name: "read-only state dir, nothing to heal", root: true, setup: func(t *testing.T, e *faultEnv) []string {
			e.WriteManifest(badManifest(fmt.Sprintf("size = %d", badModelSize)))
			return []string{"mount:ro:" + e.StateDir, "llama-completion", "-m", goodModel(e), "-p", "hi", "-n", "4"}
		}, status: 0, stdout: fmt.Sprintf("model bytes: %d\n", badModelSize)},
		// Fail open: guard cannot work, the tool runs unguarded with the
		// default's forced flags, and only guard commands exit 125.
		{name: "bad toml", setup: manifestText("[tools.npx\nargs = 1\n"), status: 0, stdout: "npx --yes cowsay\n",
			stderr: `^guard: .*manifest\.toml:1: expected ']' to close table name.*; running npx unguarded\nguard: fix the manifest \(guard manifest check\) or unset GUARD_MANIFEST\n$`},
		{name: "unknown key", setup: manifestText("[tools.jq]\ntimout = \"5s\"\n"), status: 0, stdout: "npx --yes cowsay\n",
			stderr: `^guard: .*manifest\.toml:2: unknown key tools\.jq\.timout \(did you mean timeout\?\); running npx unguarded\n`},
		{name: "unknown key, guard command", setup: func(t *testing.T, e *faultEnv) []string {
			e.WriteManifest("[tools.jq]\ntimout = \"5s\"\n")
			return []string{"guard", "status"}
		}, status: 125, stderr: `^guard: .*manifest\.toml:2: unknown key tools\.jq\.timout \(did you mean timeout\?\)\nguard: fix the manifest`},
		{name: "non-https url", setup: manifestText(`[[models]]
file = "m.gguf"
size = 10
urls = ["http://example.com/m.gguf"]
`), status: 0, stdout: "npx --yes cowsay\n", stderr: `manifest\.toml:4: .*"http://example\.com/m\.gguf" uses plain http, which is allowed only for loopback hosts.*; running npx unguarded`},
		{name: "model size 0", setup: manifestText(`[[models]]
file = "m.gguf"
size = 0
urls = ["https://example.com/m.gguf"]
`), status: 0, stdout: "npx --yes cowsay\n", stderr: `manifest\.toml:3: .*size.*must be the file's exact size in bytes, greater than zero; running npx unguarded`},
		{name: "manifest a FIFO", setup: func(t *testing.T, e *faultEnv) []string {
			os.Remove(e.Manifest)
			if err := syscall.Mkfifo(e.Manifest, 0o644); err != nil {
				t.Fatal(err)
			}
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n", stderr: `^guard: read manifest: open .*manifest\.toml: not a regular file; running npx unguarded\n`},
		{name: "manifest /dev/zero", env: []string{"GUARD_MANIFEST=/dev/zero"}, setup: func(t *testing.T, e *faultEnv) []string {
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n", stderr: `^guard: read manifest: open /dev/zero: not a regular file; running npx unguarded\n`},
		{name: "manifest too large", setup: func(t *testing.T, e *faultEnv) []string {
			e.WriteManifest("# " + strings.Repeat("x", 5<<20) + "\n")
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n", stderr: `^guard: read manifest: read .*manifest\.toml: file too large: over 4194304 bytes; running npx unguarded\n`},
		{name: "log a FIFO", setup: func(t *testing.T, e *faultEnv) []string {
			if err := syscall.Mkfifo(e.Log, 0o666); err != nil {
				t.Fatal(err)
			}
			return modelCall("/norange")(t, e) // a heal: events to log
		}, status: 0, stdout: fmt.Sprintf("model bytes: %d\n", badModelSize), stderr: `guard: heal log .*selfheal\.log is not a regular file; heal events are not logged`,
			check: removeLog},
		{name: "log a FIFO, guard status", setup: func(t *testing.T, e *faultEnv) []string {
			if err := syscall.Mkfifo(e.Log, 0o666); err != nil {
				t.Fatal(err)
			}
			return []string{"guard", "status", "--json"}
		}, status: 0, stderr: `guard: cannot read the heal log: open .*selfheal\.log: not a regular file; no events shown`,
			check: removeLog},
		{name: "GUARD_TIMEOUT typo", env: []string{"GUARD_TIMEOUT=abc"}, setup: func(t *testing.T, e *faultEnv) []string {
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n", stderr: `^guard: GUARD_TIMEOUT="abc" is not a duration \(90s\) or a number of seconds; ignored\n$`},
		{name: "symlinked log in /tmp", setup: func(t *testing.T, e *faultEnv) []string {
			victim := filepath.Join(e.Dir, "victim")
			os.WriteFile(victim, []byte("keep me\n"), 0o644)
			log := filepath.Join(e.Dir, "tmp", "selfheal.log")
			os.MkdirAll(filepath.Dir(log), 0o1777)
			os.Symlink(victim, log)
			e.Env = append(e.Env, "GUARD_LOG="+log)
			return modelCall("/norange")(t, e) // a heal: events to log
		}, status: 0, stdout: fmt.Sprintf("model bytes: %d\n", badModelSize),
			stderr: `guard: .*selfheal\.log.*symlink`,
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if b, _ := os.ReadFile(filepath.Join(e.Dir, "victim")); string(b) != "keep me\n" {
					t.Errorf("the log followed the symlink: victim now %q", b)
				}
			}},
		{name: "PATH loops through two shim folders", setup: func(t *testing.T, e *faultEnv) []string {
			// Two guard copies: B's npx is the second copy, C's npx links
			// back to the first, so each finds the other as the real npx.
			b, c := filepath.Join(e.Dir, "shimsB"), filepath.Join(e.Dir, "shimsC")
			os.MkdirAll(b, 0o755)
			os.MkdirAll(c, 0o755)
			self, _ := os.Readlink(e.Guard)
			copyExe(t, self, filepath.Join(b, "guard"))
			copyExe(t, self, filepath.Join(e.Dir, "guard-a"))
			os.Remove(filepath.Join(e.ShimDir, "guard"))
			os.Symlink(filepath.Join(e.Dir, "guard-a"), filepath.Join(e.ShimDir, "guard"))
			os.Symlink("guard", filepath.Join(b, "npx"))
			os.Symlink(filepath.Join(e.ShimDir, "guard"), filepath.Join(c, "npx"))
			os.Remove(filepath.Join(e.Bin, "npx"))
			e.Env = append(e.Env, "PATH="+e.ShimDir+":"+b+":"+c+":/usr/bin:/bin")
			return []string{"npx", "cowsay"}
		}, status: 125, stderr: `guard: npx: refused: the call went through shims 8 times in a row \(GUARD_DEPTH\); a PATH that loops through two shim folders\?`},
		{name: "evicted shared library", setup: func(t *testing.T, e *faultEnv) []string {
			bin := buildWithLib(t, filepath.Join(e.Dir, "tool"))
			os.Remove(filepath.Join(filepath.Dir(bin), "libfault.so"))
			e.WriteManifest(fmt.Sprintf("[tools.libtool]\npath = %q\n", bin))
			os.Symlink("guard", filepath.Join(e.ShimDir, "libtool"))
			return []string{"libtool"}
		}, status: 127, stderr: `guard: libtool: .*/libtool: missing library libfault\.so\n.*no build recipe or package heals it`},
		{name: "unwritable shim dir", root: true, setup: func(t *testing.T, e *faultEnv) []string {
			os.Remove(filepath.Join(e.ShimDir, "llama-completion"))
			return []string{"mount:ro:" + e.ShimDir, "npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n",
			stderr: `guard: could not mend the shim folder .*/\.shim: .*read-only file system`},
		{name: "HOME unset", setup: func(t *testing.T, e *faultEnv) []string {
			e.Env = append(e.Env, "HOME=")
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n", stderr: `^guard: HOME is not set; running npx unguarded\nguard: set HOME to your home folder\n$`},
		{name: "unknown model not gguf", setup: func(t *testing.T, e *faultEnv) []string {
			p := filepath.Join(e.Home, "other.gguf")
			os.WriteFile(p, []byte("Entry not found"), 0o644)
			return []string{"llama-completion", "-m", p, "-p", "hi"}
		}, status: 127, stderr: `model .*/other\.gguf: .*(not a GGUF|Entry not found).*the manifest does not know this file`},
		{name: "cache stats on a read-only state dir", root: true, setup: func(t *testing.T, e *faultEnv) []string {
			guardtest.WriteFile(t, filepath.Join(e.StateDir, "prompts", "ab"+strings.Repeat("0", 62)), "junk", 0o600)
			return []string{"mount:ro:" + e.StateDir, "guard", "cache", "stats"}
		}, status: 0, stdout: "entries  1\nbytes    4\nhits     0\nmisses   0\nsaved    0.0s\nfolder   $STATE/prompts\n"},
		{name: "cache clear on a read-only state dir", root: true, setup: func(t *testing.T, e *faultEnv) []string {
			guardtest.WriteFile(t, filepath.Join(e.StateDir, "prompts", "ab"+strings.Repeat("0", 62)), "junk", 0o600)
			return []string{"mount:ro:" + e.StateDir, "guard", "cache", "clear"}
		}, status: 125, stderr: `^guard: cannot clear the prompt cache in \S+/state/prompts: it is read-only or not yours; set GUARD_STATE_DIR to a folder of your own\n$`},
		{name: "control characters in names", setup: func(t *testing.T, e *faultEnv) []string {
			e.WriteManifest("[tools.\"evil\\nname\"]\npath = \"/nonexistent\\u001b[2J\"\n[[models]]\nfile = \"m\\r.gguf\"\nsize = 8\n")
			return []string{"guard", "status", "--events", "0"}
		}, status: 1, check: func(t *testing.T, e *faultEnv, r faultResult) {
			if strings.ContainsAny(r.Stdout, "\r\x1b") {
				t.Errorf("a control character reached the status table:\n%q", r.Stdout)
			}
			for _, want := range []string{`\n  "evil\\nname" +ok +-> guard\n`, `\n  "evil\\nname" +missing +"not found; tried /nonexistent\\x1b\[2J"\n`, `\n  "m\\r\.gguf" +not-fetched +download 8 B\n`} {
				if !regexp.MustCompile(want).MatchString(r.Stdout) {
					t.Errorf("status lacks %q:\n%s", want, r.Stdout)
				}
			}
		}},
		{name: "tool missing, no recipe", setup: func(t *testing.T, e *faultEnv) []string {
			os.Remove(filepath.Join(e.Bin, "npx"))
			e.Env = append(e.Env, "PATH="+e.ShimDir+":"+e.Bin)
			return []string{"npx", "cowsay"}
		}, status: 127, stderr: `guard: npx: not found; tried .*/bin/npx\nguard: no build recipe or package heals it; install it, or give \[tools\.npx\] a path, build or package in the manifest`},
		// A model path is a folder others may write: what is there that is
		// not a file is said, never waited on, never replaced.
		{name: "model a FIFO", env: []string{"GUARD_TIMEOUT=3"}, setup: func(t *testing.T, e *faultEnv) []string {
			call := modelCall("/norange")(t, e)
			mkfifo(t, call[2])
			return call
		}, status: 127, stderr: `guard: llama-completion: model .*/models/m\.gguf is a FIFO, not a regular file; guard replaces only files it made: remove it and the next call downloads the model\n`,
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				mustBeFIFO(t, filepath.Join(e.Home, "models", "m.gguf"))
			}},
		{name: "unknown model a FIFO", env: []string{"GUARD_TIMEOUT=3"}, setup: func(t *testing.T, e *faultEnv) []string {
			p := filepath.Join(e.Home, "u.gguf")
			mkfifo(t, p)
			return []string{"llama-completion", "-m", p, "-p", "hi"}
		}, status: 127, stderr: `guard: llama-completion: model .*/u\.gguf is a FIFO, not a regular file \(the manifest does not know this file, so guard cannot fetch it\)\n`},
		{name: "model a FIFO, guard status", setup: func(t *testing.T, e *faultEnv) []string {
			mkfifo(t, filepath.Join(e.Home, "m.gguf"))
			return []string{"guard", "status", "--json"}
		}, status: 1, check: func(t *testing.T, e *faultEnv, r faultResult) {
			var rep struct {
				Problems []struct{ What, Fix string }
				Models   []struct{ File, State, Reason string }
			}
			if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
				t.Fatal(err)
			}
			if len(rep.Models) != 1 || rep.Models[0].State != "not-regular" || rep.Models[0].Reason != "a FIFO, not a regular file; guard replaces only files it made" {
				t.Errorf("models: %+v", rep.Models)
			}
			fix := "rm " + filepath.Join(e.Home, "m.gguf")
			if len(rep.Problems) != 1 || rep.Problems[0].What != "model m.gguf" || rep.Problems[0].Fix != fix {
				t.Errorf("problems: %+v, want model m.gguf fixed by %s", rep.Problems, fix)
			}
		}},
		{name: "model a FIFO, guard heal", setup: func(t *testing.T, e *faultEnv) []string {
			mkfifo(t, filepath.Join(e.Home, "m.gguf"))
			return []string{"guard", "heal"}
		}, status: 1, check: func(t *testing.T, e *faultEnv, r faultResult) {
			if !regexp.MustCompile(`\nmodel +m\.gguf +failed: a FIFO, not a regular file; guard replaces only files it made; run rm \S+/m\.gguf\n`).MatchString(r.Stdout) {
				t.Errorf("heal does not name status's fix:\n%s", r.Stdout)
			}
			mustBeFIFO(t, filepath.Join(e.Home, "m.gguf"))
		}},
		// A model reached through a symlinked file is healed at the link's
		// target: the link stays, and both paths are one file, one lock.
		{name: "model through a symlinked file", setup: func(t *testing.T, e *faultEnv) []string {
			call := modelCall("/norange")(t, e)
			alias := filepath.Join(e.Dir, "alias", "m.gguf")
			os.MkdirAll(filepath.Dir(alias), 0o755)
			os.MkdirAll(filepath.Dir(call[2]), 0o755)
			os.Symlink(call[2], alias) // dangling: the model was evicted
			call[2] = alias
			return call
		}, status: 0, stdout: fmt.Sprintf("model bytes: %d\n", badModelSize),
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				alias, real := filepath.Join(e.Dir, "alias", "m.gguf"), filepath.Join(e.Home, "models", "m.gguf")
				if fi, err := os.Lstat(alias); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the link was not kept: %v %v", fi, err)
				}
				if b, _ := os.ReadFile(real); string(b) != string(model) {
					t.Errorf("the link's target is not the model (%d bytes)", len(b))
				}
				again := e.Run("llama-completion", "-m", real, "-p", "hi", "-n", "4")
				if again.Code != 0 {
					t.Errorf("the call by the target's path: %s", again)
				}
				if n := len(logEvents(t, e.Log, "model.download")); n != 1 {
					t.Errorf("%d downloads, want 1", n)
				}
				if locks, _ := filepath.Glob(filepath.Join(e.StateDir, "locks", "model-*")); len(locks) != 1 {
					t.Errorf("model locks %v, want one for both paths", locks)
				}
			}},
		{name: "model link of another user", setup: func(t *testing.T, e *faultEnv) []string {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a link away")
			}
			call := modelCall("/norange")(t, e)
			victim := filepath.Join(e.Dir, "victim")
			os.WriteFile(victim, []byte("keep me\n"), 0o644)
			shared := filepath.Join(e.Dir, "shared")
			os.MkdirAll(shared, 0o1777)
			link := filepath.Join(shared, "m.gguf")
			os.Symlink(victim, link)
			if err := os.Lchown(link, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			call[2] = link
			return call
		}, status: 127, stderr: `model .*/shared/m\.gguf is a symlink of uid 65534; guard follows only links of its own user or root: remove it, or use the file's own path`,
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if b, _ := os.ReadFile(filepath.Join(e.Dir, "victim")); string(b) != "keep me\n" {
					t.Errorf("the link was followed: victim now %d bytes", len(b))
				}
				if fi, err := os.Lstat(filepath.Join(e.Dir, "shared", "m.gguf")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the link is gone: %v %v", fi, err)
				}
			}},
		// guard's own files are never waited on and never followed: what
		// was planted in their place is replaced.
		{name: "lock a FIFO", env: []string{"GUARD_TIMEOUT=2"}, setup: func(t *testing.T, e *faultEnv) []string {
			os.MkdirAll(filepath.Join(e.StateDir, "locks"), 0o700)
			mkfifo(t, filepath.Join(e.StateDir, "locks", "shims.lock"))
			os.Remove(filepath.Join(e.ShimDir, "llama-completion"))
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n",
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				mustBeRegular(t, filepath.Join(e.StateDir, "locks", "shims.lock"))
				if _, err := os.Lstat(filepath.Join(e.ShimDir, "llama-completion")); err != nil {
					t.Errorf("the shim was not mended: %v", err)
				}
			}},
		{name: "lock a symlink", setup: func(t *testing.T, e *faultEnv) []string {
			os.MkdirAll(filepath.Join(e.StateDir, "locks"), 0o700)
			os.Symlink(filepath.Join(e.Dir, "created-by-guard"), filepath.Join(e.StateDir, "locks", "shims.lock"))
			os.Remove(filepath.Join(e.ShimDir, "llama-completion"))
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n",
			check: func(t *testing.T, e *faultEnv, r faultResult) {
				if _, err := os.Lstat(filepath.Join(e.Dir, "created-by-guard")); err == nil {
					t.Error("the lock's link was followed: its target was created")
				}
				mustBeRegular(t, filepath.Join(e.StateDir, "locks", "shims.lock"))
			}},
		{name: "install marker a FIFO", env: []string{"GUARD_TIMEOUT=2"}, setup: func(t *testing.T, e *faultEnv) []string {
			// The shim folder gone whole: the marker says whether it is
			// the one install made and a call should rebuild.
			os.Remove(filepath.Join(e.StateDir, "installed"))
			mkfifo(t, filepath.Join(e.StateDir, "installed"))
			e.Env = append(e.Env, "GUARD_SHIM_DIR="+filepath.Join(e.Dir, "gone"))
			return []string{"npx", "cowsay"}
		}, status: 0, stdout: "npx --yes cowsay\n"},
		// A manifest path that is there but not executable is the shell's
		// 126, with the fix guard cannot make; status names the same fix.
		{name: "manifest path not executable", setup: func(t *testing.T, e *faultEnv) []string {
			notExec(t, e)
			return []string{"foo"}
		}, status: 126, stderr: `^guard: foo: .*/notexec is not executable: run chmod \+x .*/notexec\n$`},
		{name: "manifest path not executable, guard heal", setup: func(t *testing.T, e *faultEnv) []string {
			notExec(t, e)
			return []string{"guard", "heal", "--dry-run"}
		}, status: 0, check: func(t *testing.T, e *faultEnv, r faultResult) {
			if !regexp.MustCompile(`\ntool +foo +would fail: \S+/notexec is not executable; run chmod \+x \S+/notexec\n`).MatchString(r.Stdout) {
				t.Errorf("heal does not name status's fix:\n%s", r.Stdout)
			}
		}},
		{name: "manifest path not executable, guard status", setup: func(t *testing.T, e *faultEnv) []string {
			notExec(t, e)
			return []string{"guard", "status", "--json"}
		}, status: 1, check: func(t *testing.T, e *faultEnv, r faultResult) {
			var rep struct {
				Problems []struct{ What, Fix string }
				Tools    []struct{ Name, State, Reason string }
			}
			if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(e.Dir, "notexec")
			for _, tool := range rep.Tools {
				if tool.Name == "foo" && (tool.State != "broken" || tool.Reason != path+" is not executable") {
					t.Errorf("tool foo: %+v", tool)
				}
			}
			if len(rep.Problems) != 1 || rep.Problems[0].What != "tool foo" || rep.Problems[0].Fix != "chmod +x "+path {
				t.Errorf("problems: %+v", rep.Problems)
			}
		}},
	}

	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel() // each case has a guard installation of its own; the server keeps no state
			if tc.root && !mounts {
				t.Skip("needs root and unshare for a mount namespace")
			}
			e := newFaultEnv(t, badManifest(fmt.Sprintf("size = %d", badModelSize)))
			e.Tool("llama-completion", fakeModelReader)
			e.Tool("npx", `echo "npx $*"`)
			e = e.With(tc.env...)
			call := tc.setup(t, e)
			var r faultResult
			if m, ok := strings.CutPrefix(call[0], "mount:"); ok {
				parts := strings.Split(m, ":")
				size := ""
				if len(parts) > 2 {
					size = parts[2]
				}
				r = e.underMount(parts[0], parts[1], size, call[1], call[2:]...)
			} else {
				r = e.Run(call[0], call[1:]...)
			}
			t.Logf("%s", r)
			assertNoCrash(t, tc.name, r)
			if r.Code != tc.status {
				t.Errorf("exit %d, want %d\n%s", r.Code, tc.status, r)
			}
			if tc.stderr != "" && !regexp.MustCompile(tc.stderr).MatchString(r.Stderr) {
				t.Errorf("stderr does not match %q\n%s", tc.stderr, r)
			}
			if tc.stdout != "" && r.Stdout != strings.ReplaceAll(tc.stdout, "$STATE", e.StateDir) {
				t.Errorf("stdout %q, want %q", r.Stdout, tc.stdout)
			}
			if tc.check != nil {
				tc.check(t, e, r)
			}
			checkLocksFree(t, e.StateDir)
			checkLogLines(t, e.Log)
		})
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustBeFIFO(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("%s is no longer the FIFO that was there: %v %v", path, fi, err)
	}
}

func mustBeRegular(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s is not a regular file: %v %v", path, fi, err)
	}
}

// notExec makes tool foo's manifest path a file without the execute bit.
func notExec(t *testing.T, e *faultEnv) {
	t.Helper()
	guardtest.WriteFile(t, filepath.Join(e.Dir, "notexec"), "#!/bin/sh\necho hi\n", 0o644)
	e.WriteManifest(badManifest(fmt.Sprintf("size = %d", badModelSize)) + "[tools.foo]\npath = \"$DIR/notexec\"\n")
	os.Symlink("guard", filepath.Join(e.ShimDir, "foo"))
}

// removeLog takes away a FIFO a case planted as the log, which the table's
// own log check would wait on.
func removeLog(t *testing.T, e *faultEnv, _ faultResult) { os.Remove(e.Log) }

// badManifest is the table's manifest: a fake llama-completion and npx,
// a short heal budget so retries end fast, and one model whose size and
// urls lines are given.
func badManifest(model string) string {
	return `[budget]
heal = "2s"

[tools.npx]
args = ["--yes"]

[tools.llama-completion]
path = "$BIN/llama-completion"
cache = false

[[models]]
file = "m.gguf"
` + model + "\n"
}

func copyExe(t *testing.T, src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// buildWithLib compiles a tiny program that needs libfault.so beside it
// (an $ORIGIN RPATH, like llama.cpp's build/bin) and returns its path.
func buildWithLib(t *testing.T, dir string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("lib.c", "int fault_answer(void) { return 42; }\n")
	write("main.c", "#include <stdio.h>\nint fault_answer(void);\nint main(void) { printf(\"%d\\n\", fault_answer()); return 0; }\n")
	for _, argv := range [][]string{
		{cc, "-shared", "-fPIC", "-o", "libfault.so", "lib.c"},
		{cc, "-o", "libtool", "main.c", "-L.", "-lfault", "-Wl,-rpath,$ORIGIN"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
	}
	return filepath.Join(dir, "libtool")
}

// nilMapWrite is what the runtime panics with on a write to a nil map: a
// runtime.Error whose text is the runtime's own.
type nilMapWrite struct{}

func (nilMapWrite) Error() string { return "assignment to entry in nil map" }
func (nilMapWrite) RuntimeError() {}

// A panic anywhere on the call's goroutine becomes exit 125, a message that
// says it is guard's own bug, and an error event in the heal log. (guard
// has no hidden trigger for a panic, so this calls the deferred Recover the
// way run does.)
func TestRecoverTurnsPanicInto125(t *testing.T) {
	log := filepath.Join(t.TempDir(), "selfheal.log")
	t.Setenv("GUARD_LOG", log)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	status := func() (status int) {
		defer guard.Recover(&status, world())
		panic(nilMapWrite{}) // an error value, as the runtime panics with, not a string
	}()
	os.Stderr = stderr
	w.Close()
	out, _ := io.ReadAll(r)
	if status != 125 {
		t.Errorf("status %d, want 125", status)
	}
	if !strings.HasPrefix(string(out), "guard: internal error: assignment to entry in nil map\nguard: please report it") {
		t.Errorf("message:\n%s", out)
	}
	evs := logEvents(t, log, "call.end")
	if len(evs) != 1 || evs[0]["level"] != "error" || evs[0]["result"] != "failed" ||
		!strings.Contains(fmt.Sprint(evs[0]["reason"]), "panic: assignment to entry in nil map") {
		t.Errorf("heal log events: %v", evs)
	}
}
