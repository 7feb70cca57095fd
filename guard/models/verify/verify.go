package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sandbox-guard/guard/guard/state"
)

// Status is the state of a model file.
type Status string

// The states Quick and Full report.
const (
	OK           Status = "ok"            // sha256 confirmed (by a stamp or a hash) against a pin, or against what the server declared
	Unverified   Status = "unverified"    // size and header fine, no sha256 to check against
	Missing      Status = "missing"       // no file (or not readable)
	Truncated    Status = "truncated"     // size differs from the manifest (shorter or longer)
	NotGGUF      Status = "not-gguf"      // header is not GGUF v2/v3 (an error page, a pointer)
	HashMismatch Status = "hash-mismatch" // sha256 differs from the pin
	Stale        Status = "stale"         // pinned, but no stamp matches the file: hash once
	NotRegular   Status = "not-regular"   // a FIFO, device, socket or folder: guard did not make it and will not replace it
)

// Healthy reports whether a call may use the file as it is.
func (s Status) Healthy() bool { return s == OK || s == Unverified }

// Hashable reports whether a full hash can settle the file: it is healthy,
// or pinned and only waiting for that hash.
func (s Status) Hashable() bool { return s.Healthy() || s == Stale }

// Spec is what a file must be.
type Spec struct {
	Path   string
	Size   int64  // exact bytes; 0 = unknown: header only
	SHA256 string // hex; "" = not pinned
}

// Quick is the per-call check. It opens the file once, takes its fstat,
// reads HeaderSize bytes and reads the stamp: no hashing, so its cost does
// not grow with the file. A pinned file is OK only when the stamp's sum is
// the pin and the stamp's size, mtime, ctime, device and inode are the
// file's; a stamp of the same file with another sum is HashMismatch;
// anything else is Stale. A file with no pin is OK when a stamp of the
// same file says its sum was checked against a declared one (the server's
// X-Linked-Etag), else Unverified.
func Quick(s Spec, stampDir string) Status { return quick(s, stampDir, true) }

// Usable is Quick for a caller that only asks Status.Healthy (a call about
// to load the model): it answers as Quick does, except that a healthy file
// with no pin is Unverified without its stamp being read, since OK and
// Unverified are both healthy. Status and pin, which tell the two apart,
// use Quick.
func Usable(s Spec, stampDir string) Status { return quick(s, stampDir, false) }

// quick is Quick; declared false skips the stamp of a file with no pin
// (Usable).
func quick(s Spec, stampDir string, declared bool) Status {
	f, fi, err := open(s.Path)
	if err != nil {
		if errors.Is(err, state.ErrNotRegular) {
			return NotRegular
		}
		return Missing
	}
	defer f.Close()
	st, id, err := checkOpen(f, fi, s)
	if err != nil || st != "" {
		if err != nil {
			return Missing
		}
		return st
	}
	if s.SHA256 == "" {
		// No pin: the file is trusted as far as a declared sum it was
		// checked against, while it stays the file it was.
		if !declared {
			return Unverified
		}
		if rec, ok := readStamp(stampDir, s.Path); ok && rec.Identity == id && rec.DeclaredBy != "" {
			return OK
		}
		return Unverified
	}
	rec, ok := readStamp(stampDir, s.Path)
	if !ok || rec.Identity != id {
		return Stale
	}
	if rec.SHA256 != normalSum(s.SHA256) {
		return HashMismatch
	}
	return OK
}

// open opens a model file for the checks: non-blocking and only when it is
// a regular file (a FIFO at a model path would hold the call forever, a
// folder or device is no model), following a link, since a model may be
// one (state.OpenRegularStat).
func open(path string) (*os.File, os.FileInfo, error) {
	return state.OpenRegularStat(path, false)
}

// checkOpen runs the cheap checks on an open regular file, fi its fstat:
// size, header. It returns a non-empty Status when the file fails one.
func checkOpen(f *os.File, fi os.FileInfo, s Spec) (Status, state.Identity, error) {
	id := state.IdentityOf(fi)
	if s.Size > 0 && id.Size != s.Size {
		return Truncated, id, nil
	}
	var hdr [HeaderSize]byte
	n, err := f.ReadAt(hdr[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", id, fmt.Errorf("read %s: %w", s.Path, err)
	}
	if Header(hdr[:n]) != nil {
		return NotGGUF, id, nil
	}
	return "", id, nil
}

// Full runs the cheap checks, then hashes the whole file. On a match with
// the pin, or when nothing is pinned, it writes the stamp so that Quick
// answers without hashing from then on. A mismatch is stamped too, with
// the real sum, so Quick keeps reporting HashMismatch without a rehash.
// The error is for I/O failures (and a file that changed while being
// hashed), not for a bad file, which is a Status.
func Full(s Spec, stampDir string) (Status, string, error) {
	f, fi, err := open(s.Path)
	if err != nil {
		switch {
		case os.IsNotExist(err):
			return Missing, "", nil
		case errors.Is(err, state.ErrNotRegular):
			return NotRegular, "", nil
		}
		return Missing, "", fmt.Errorf("open %s: %w", s.Path, err)
	}
	defer f.Close()
	st, id, err := checkOpen(f, fi, s)
	if err != nil {
		return Stale, "", err
	}
	if st != "" {
		return st, "", nil
	}
	sum, err := sumReader(f)
	if err != nil {
		return Stale, "", fmt.Errorf("hash %s: %w", s.Path, err)
	}
	if fi, err = f.Stat(); err != nil {
		return Stale, "", fmt.Errorf("stat %s: %w", s.Path, err)
	}
	if state.IdentityOf(fi) != id {
		return Stale, "", fmt.Errorf("hash %s: the file changed while it was hashed", s.Path)
	}
	st = statusFor(s, sum)
	by := ""
	if st == OK {
		by = "manifest"
	}
	if err := writeStamp(stampDir, s.Path, sum, by, id); err != nil {
		return st, sum, err
	}
	return st, sum, nil
}

func statusFor(s Spec, sum string) Status {
	switch {
	case s.SHA256 == "":
		return Unverified
	case normalSum(s.SHA256) == sum:
		return OK
	default:
		return HashMismatch
	}
}

// sumBuf is large so that a multi-GB model is read in few syscalls.
const sumBuf = 1 << 20

func sumReader(r io.Reader) (string, error) {
	h := sha256.New()
	buf := make([]byte, sumBuf)
	if _, err := io.CopyBuffer(h, onlyReader{r}, buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// onlyReader hides WriterTo/ReaderFrom so CopyBuffer really uses buf.
type onlyReader struct{ io.Reader }

func normalSum(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
