package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Download goals (issue 29): over plain loopback guard at least curl's
// throughput; behind a per-connection cap (as a CDN sets) at least 5x
// curl's and 0.9x aria2c's with 8 connections; guard's RSS under 64 MB in
// both, whatever the file's size.
const (
	downloadGoal      = 1.0
	cappedCurlGoal    = 5.0
	cappedAria2Goal   = 0.9
	downloadRSS       = 64 << 20
	cappedRate        = 20 << 20 // bytes/s a connection
	cappedFirstByte   = 50 * time.Millisecond
	cappedConnections = 8
)

// downloadTable times guard's model download (guard heal: lock, resumable
// fetch, hashing as the bytes arrive, in one stream or in parts as the
// first part's rate says, fsync, rename, header check) against `curl -o` and `aria2c -x8 -s8`, from the same loopback
// file server into the same folder.
func downloadTable(sizeMB int) *Table {
	size := int64(sizeMB) << 20
	return &Table{
		Name:    "download",
		Title:   fmt.Sprintf("Download: guard's resumable, verified fetch against curl and aria2c over loopback, %d MB (goal: >= %.1fx curl, rss < %d MB)", sizeMB, downloadGoal, downloadRSS>>20),
		Anchors: []string{"curl"},
		Bytes:   size,
		Knobs:   Knobs{Runs: 5, Rounds: 5, Warmup: 0, Stat: "median"},
		Timeout: 5 * time.Minute,
		Setup:   func(s *Sandbox) error { return downloadSetup(s, size, false) },
		Rows: append(downloadAnchors(),
			// What curl costs when it checks what it fetched, as guard
			// does, with the fastest sha256 at hand (OpenSSL's, which
			// uses the CPU's SHA instructions as Go's does; Debian's
			// sha256sum does not): no goal, a figure beside the anchor.
			Row{
				Name: "curl+openssl",
				Setup: func(*Sandbox, *Row) error {
					_, err := exec.LookPath("openssl")
					return err
				},
				Before: remove("$DEST/checked.gguf"),
				Argv:   []string{"sh", "-c", `curl -sSf -o "$0" "$1" && openssl dgst -sha256 "$0" >/dev/null`, "$DEST/checked.gguf", "$URL/m.gguf"},
			},
			// guard's copy loop alone, without and with the sha256
			// (cmd/bench/floor/stream): what guard's download costs
			// apart from the hash, and what the hash adds.
			Row{
				Name:   "stream-floor",
				Setup:  build("./cmd/bench/floor/stream"),
				Before: remove("$DEST/floor.gguf"),
				Argv:   []string{"$BUILT/stream", "$URL/m.gguf", "$DEST/floor.gguf"},
			},
			Row{
				Name:   "stream+sha256",
				Setup:  build("./cmd/bench/floor/stream"),
				Before: remove("$DEST/floor.gguf"),
				Argv:   []string{"$BUILT/stream", "-sha256", "$URL/m.gguf", "$DEST/floor.gguf"},
			},
			Row{
				Name:   "guard",
				Setup:  guardInstalled,
				Before: remove("$DEST/m.gguf"),
				Argv:   []string{"$SHIM_DIR/guard", "heal", "m.gguf"},
				Goal:   &Goal{Anchor: "curl", Max: 1 / downloadGoal, MaxRSS: downloadRSS, What: fmt.Sprintf(">= %.2fx curl's MB/s", downloadGoal)},
			}),
	}
}

// cappedTable is downloadTable behind a server that, as a CDN does, caps
// each connection at 20 MB/s and waits 50 ms before each response's first
// byte: one stream gets 20 MB/s whatever the link, several get more.
func cappedTable(sizeMB int) *Table {
	size := int64(sizeMB) << 20
	return &Table{
		Name: "download-capped",
		Title: fmt.Sprintf("Download behind a per-connection cap (%d MB/s a connection, %s to the first byte): guard against curl and aria2c -x8 -s8, %d MB (goal: >= %.0fx curl, >= %.1fx aria2c, rss < %d MB)",
			cappedRate>>20, cappedFirstByte, sizeMB, cappedCurlGoal, cappedAria2Goal, downloadRSS>>20),
		Anchors: []string{"curl", "aria2c"},
		Bytes:   size,
		Knobs:   Knobs{Runs: 3, Rounds: 3, Warmup: 0, Stat: "median"},
		Timeout: 10 * time.Minute,
		Setup:   func(s *Sandbox) error { return downloadSetup(s, size, true) },
		Rows: append(downloadAnchors(),
			Row{
				Name:   "guard",
				Setup:  guardInstalled,
				Before: remove("$DEST/m.gguf"),
				Argv:   []string{"$SHIM_DIR/guard", "heal", "m.gguf"},
				Goal: &Goal{Anchor: "curl", Max: 1 / cappedCurlGoal, MaxRSS: downloadRSS, What: fmt.Sprintf(">= %.1fx curl's MB/s", cappedCurlGoal),
					And: &Goal{Anchor: "aria2c", Max: 1 / cappedAria2Goal, What: fmt.Sprintf(">= %.1fx aria2c's", cappedAria2Goal)}},
			}),
	}
}

// downloadAnchors are the tools guard's download is timed against: curl
// (one stream) and Debian's aria2c over 8 connections (skipped when it is
// not installed: apt-get install aria2).
func downloadAnchors() []Row {
	return []Row{
		{
			Name:   "curl",
			Before: remove("$DEST/curl.gguf"),
			Argv:   []string{"curl", "-sSf", "-o", "$DEST/curl.gguf", "$URL/m.gguf"},
		},
		{
			Name:   "aria2c",
			Before: remove("$DEST/aria2c.gguf"),
			Argv: []string{"aria2c", "-q", "-x8", "-s8", "--allow-overwrite=true", "--auto-file-renaming=false",
				"-d", "$DEST", "-o", "aria2c.gguf", "$URL/m.gguf"},
		},
	}
}

// downloadSetup writes the model (a GGUF header, then random bytes that
// nothing compresses), serves it over loopback with the standard library's
// file server (sendfile on its side, the same for both rows), and names
// it in the manifest. Both rows write into $DEST: a tmpfs when there is
// one, to leave the disk out of both figures.
func downloadSetup(s *Sandbox, size int64, capped bool) error {
	if size < 8 {
		return fmt.Errorf("size %d: a model needs at least its 8-byte header", size)
	}
	srv := filepath.Join(s.Dir, "srv")
	if err := writeModel(filepath.Join(srv, "m.gguf"), size); err != nil {
		return err
	}
	url, err := serveFolder(s, srv, capped)
	if err != nil {
		return err
	}
	s.Set("URL", url)

	dest := filepath.Join(s.Dir, "dest")
	if shm, err := os.MkdirTemp("/dev/shm", "guard-bench."); err == nil {
		dest = shm
		s.Cleanup(func() { os.RemoveAll(shm) })
	} else if err := os.Mkdir(dest, 0o755); err != nil {
		return err
	}
	s.Set("DEST", dest)
	return s.WriteFile("$GUARD_MANIFEST", fmt.Sprintf(`models_dir = %q

[[models]]
file = "m.gguf"
size = %d
urls = [%q]
`, dest, size, s.Expand("$URL/m.gguf")), 0o644)
}

// serveFolder serves dir over loopback with the standard library's file
// server (sendfile on its side) until the table is done, and returns its
// http://127.0.0.1:PORT. capped waits cappedFirstByte before each answer
// and sends each at most cappedRate.
func serveFolder(s *Sandbox, dir string, capped bool) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	h := http.FileServer(http.Dir(dir))
	if capped {
		files := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(cappedFirstByte)
			files.ServeHTTP(&throttled{ResponseWriter: w, next: time.Now(), rate: cappedRate}, r)
		})
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln) // returns when Close is called below
	s.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String(), nil
}

func writeModel(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("GGUF\x03\x00\x00\x00")
	_, err = io.CopyN(w, rand.NewChaCha8([32]byte{}), size-8)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// throttled paces one response (and so one connection at a time) at rate
// bytes/s, 64 KiB at a time, as a token bucket that holds four such
// pieces: enough to make up for a sleep that overshot, while time the
// client spent not reading earns no burst beyond them.
type throttled struct {
	http.ResponseWriter
	next time.Time // when the next piece may go
	rate float64
}

func (t *throttled) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), 64<<10)
		if wait := time.Until(t.next); wait > 0 {
			time.Sleep(wait)
		}
		piece := time.Duration(float64(k) / t.rate * float64(time.Second))
		if floor := time.Now().Add(-4 * piece); t.next.Before(floor) {
			t.next = floor
		}
		w, err := t.ResponseWriter.Write(p[:k])
		n += w
		if err != nil {
			return n, err
		}
		t.next = t.next.Add(piece)
		p = p[k:]
	}
	return n, nil
}
