package scripttest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"
)

// Commands for the llama, prompt-cache and swarm scripts.

// stdinopen N CMD ARGS...: like exits, but CMD's stdin is a pipe whose
// writing end stays open until CMD is done, as in an agent sandbox that
// never closes the tool's input. (testscript's own stdin always ends.)
func cmdStdinOpen(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 || neg {
		ts.Fatalf("usage: stdinopen N CMD [ARGS...]")
	}
	dir, err := os.MkdirTemp(ts.Getenv("WORK"), "stdin-")
	ts.Check(err)
	defer os.RemoveAll(dir)
	fifo := filepath.Join(dir, "in")
	ts.Check(syscall.Mkfifo(fifo, 0o600))
	// Opened read-write, so the open does not wait for a reader; this test
	// process is the writer that never writes and never closes in time.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	ts.Check(err)
	defer w.Close()
	// The shell only redirects and execs: no text of the test is run by it.
	sh := []string{args[0], "sh", "-c", `f=$1; shift; exec "$@" < "$f"`, "sh", fifo}
	cmdExits(ts, false, append(sh, args[1:]...))
}

// cacheentries DIR N: DIR holds exactly N prompt-cache entries (files named
// by a 64-digit hex key; the counters and temp files do not count).
func cmdCacheEntries(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: cacheentries DIR N")
	}
	want, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("cacheentries: bad count %q", args[1])
	}
	if got := len(cacheEntries(ts, args[0])); got != want {
		ts.Fatalf("%s holds %d cache entries, want %d", args[0], got, want)
	}
}

// corruptentries DIR: overwrite every cache entry in DIR with junk of the
// same size, as a disk error or a partial copy might leave it.
func cmdCorruptEntries(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: corruptentries DIR")
	}
	entries := cacheEntries(ts, args[0])
	if len(entries) == 0 {
		ts.Fatalf("no cache entries in %s", args[0])
	}
	for _, path := range entries {
		fi, err := os.Stat(path)
		ts.Check(err)
		junk := make([]byte, fi.Size())
		for i := range junk {
			junk[i] = 'x'
		}
		ts.Check(os.WriteFile(path, junk, 0o600))
	}
}

// invalidutf8 FILE: FILE is not valid UTF-8, so a byte-for-byte comparison
// of it shows that nothing on the way decoded or re-encoded text.
func cmdInvalidUTF8(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: invalidutf8 FILE")
	}
	valid := utf8.ValidString(ts.ReadFile(args[0]))
	if valid != neg {
		ts.Fatalf("%s: valid UTF-8 is %v", args[0], valid)
	}
}

// linebefore FILE A B: in FILE, the first line that starts with A comes
// before the first line that starts with B (both must be there).
func cmdLineBefore(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 || neg {
		ts.Fatalf("usage: linebefore FILE A B")
	}
	lines := strings.Split(ts.ReadFile(args[0]), "\n")
	a, b := firstWithPrefix(lines, args[1]), firstWithPrefix(lines, args[2])
	if a < 0 || b < 0 {
		ts.Fatalf("%s: no line starting with %q (%d) or %q (%d)", args[0], args[1], a, args[2], b)
	}
	if a >= b {
		ts.Fatalf("%s: %q is line %d, after %q on line %d", args[0], args[1], a+1, args[2], b+1)
	}
}

func cacheEntries(ts *testscript.TestScript, dir string) []string {
	names, err := os.ReadDir(ts.MkAbs(dir))
	if err != nil && !os.IsNotExist(err) {
		ts.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, n := range names {
		if isKeyName(n.Name()) && n.Type().IsRegular() {
			out = append(out, filepath.Join(ts.MkAbs(dir), n.Name()))
		}
	}
	return out
}

func isKeyName(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func firstWithPrefix(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return -1
}
