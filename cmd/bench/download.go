package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// downloadGoal: guard's download at least 0.8x curl's throughput, that is
// at most 1/0.8 of its time.
const downloadGoal = 0.8

// downloadTable times guard's model download (guard heal: lock, resumable
// fetch hashing while it writes, fsync, rename, header check) against
// `curl -o`, from the same loopback file server into the same folder.
func downloadTable(sizeMB int) *Table {
	size := int64(sizeMB) << 20
	return &Table{
		Name:    "download",
		Title:   fmt.Sprintf("Download: guard's resumable, verified fetch against curl over loopback, %d MB (goal: >= %.1fx curl)", sizeMB, downloadGoal),
		Anchors: []string{"curl"},
		Bytes:   size,
		Knobs:   Knobs{Runs: 5, Rounds: 5, Warmup: 0, Stat: "median"},
		Timeout: 5 * time.Minute,
		Setup:   func(s *Sandbox) error { return downloadSetup(s, size) },
		Rows: []Row{
			{
				Name:   "curl",
				Before: remove("$DEST/curl.gguf"),
				Argv:   []string{"curl", "-sSf", "-o", "$DEST/curl.gguf", "$URL/m.gguf"},
			},
			{
				Name:   "guard",
				Setup:  guardInstalled,
				Before: remove("$DEST/m.gguf"),
				Argv:   []string{"$SHIM_DIR/guard", "heal", "m.gguf"},
				Goal:   &Goal{Anchor: "curl", Max: 1 / downloadGoal, What: fmt.Sprintf(">= %.2fx curl's MB/s", downloadGoal)},
			},
		},
	}
}

// downloadSetup writes the model (a GGUF header, then random bytes that
// nothing compresses), serves it over loopback with the standard library's
// file server (sendfile on its side, the same for both rows), and names
// it in the manifest. Both rows write into $DEST: a tmpfs when there is
// one, to leave the disk out of both figures.
func downloadSetup(s *Sandbox, size int64) error {
	if size < 8 {
		return fmt.Errorf("size %d: a model needs at least its 8-byte header", size)
	}
	srv := filepath.Join(s.Dir, "srv")
	if err := writeModel(filepath.Join(srv, "m.gguf"), size); err != nil {
		return err
	}
	url, err := serveFolder(s, srv)
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
// http://127.0.0.1:PORT.
func serveFolder(s *Sandbox, dir string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	hs := &http.Server{Handler: http.FileServer(http.Dir(dir))}
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
