package builds

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// stampHeader starts every binary stamp; bump the number when the format or
// the meaning of a check changes, so old stamps are ignored.
const stampHeader = "guard-binary-stamp 1"

// maxStamp bounds a stamp's size; a binary with more dependencies than fit
// is simply not stamped and gets the full check each time.
const maxStamp = 8192

// fileID is what must stay the same for a stamp to hold: a rebuilt or
// replaced binary gets a new inode, mtime or size.
func fileID(fi os.FileInfo) string {
	var dev, ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		dev, ino = uint64(st.Dev), st.Ino
	}
	return fmt.Sprintf("%d %d %d %d %o", dev, ino, fi.ModTime().UnixNano(), fi.Size(), fi.Mode().Perm())
}

func stampPath(dir, binary string) string {
	sum := sha256.Sum256([]byte(binary))
	return filepath.Join(dir, "bin-"+hex.EncodeToString(sum[:16]))
}

// stampStillHolds reads the stamp and stats every file it lists. Any
// mismatch sends the caller to the full check, which rewrites the stamp.
func stampStillHolds(stamp, binary, id string) bool {
	data, ok := readSmall(stamp)
	if !ok {
		return false
	}
	lines := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
	if len(lines) < 2 || lines[0] != stampHeader+" "+id || lines[1] != binary {
		return false
	}
	var st syscall.Stat_t
	for _, dep := range lines[2:] {
		if syscall.Stat(dep, &st) != nil {
			return false
		}
	}
	return true
}

// readSmall reads a stamp with raw descriptors: open, one read, close.
// os.ReadFile adds an fstat, a second read and a poller registration, and
// every syscall counts on the per-call path.
func readSmall(path string) (string, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	defer syscall.Close(fd)
	var buf [maxStamp]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 || n == len(buf) {
		return "", false
	}
	return string(buf[:n]), true
}

// writeStamp records a healthy check. Failures are ignored: a missing stamp
// only costs the next call a full check.
func writeStamp(stamp, binary, id string, deps []string) {
	var b strings.Builder
	b.WriteString(stampHeader + " " + id + "\n" + binary + "\n")
	for _, d := range append([]string{binary}, deps...) {
		if strings.Contains(d, "\n") {
			return // cannot be written one a line; never stamp it
		}
	}
	for _, d := range deps {
		b.WriteString(d + "\n")
	}
	if b.Len() >= maxStamp {
		return
	}
	dir := filepath.Dir(stamp)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".stamp-*")
	if err != nil {
		return
	}
	_, werr := tmp.WriteString(b.String())
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), stamp) != nil {
		os.Remove(tmp.Name())
	}
}
