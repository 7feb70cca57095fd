// Package verify decides whether a model file on disk can be trusted, and
// does so without reading it on the per-call path.
//
// Quick costs one open, one fstat, one 8-byte read and one stamp read, the
// same for a 1 KB file as for a 2 GB one. It trusts a pinned sha256 only
// through a stamp: a small record, written after a full hash, of the sum
// together with the size, mtime, ctime, device and inode the file had then.
// Any change to the file changes one of those, and Quick answers "stale" so
// that the caller hashes once, under its lock, and writes a fresh stamp.
package verify

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// HeaderSize is the number of bytes Header needs: the magic and the version.
const HeaderSize = 8

// HeaderError says why a file is not a usable GGUF model. Kind is a short
// word for programs ("empty", "html", "entry-not-found", "json",
// "git-lfs", "short", "version", "magic").
type HeaderError struct {
	Kind   string
	Detail string
}

func (e *HeaderError) Error() string { return e.Detail }

// Header checks the first bytes of a file (at least HeaderSize, more gives
// better messages): the magic "GGUF" and a little-endian u32 version of 2
// or 3. A body that is an error page rather than a model is named as such.
func Header(b []byte) error {
	if len(b) == 0 {
		return &HeaderError{Kind: "empty", Detail: "empty file, not a GGUF model"}
	}
	if bytes.HasPrefix(b, []byte("GGUF")) {
		if len(b) < HeaderSize {
			return &HeaderError{Kind: "short", Detail: fmt.Sprintf("file ends after %d bytes, inside the GGUF header", len(b))}
		}
		v := binary.LittleEndian.Uint32(b[4:8])
		if v != 2 && v != 3 {
			detail := fmt.Sprintf("GGUF version %d is not supported (want 2 or 3)", v)
			if bs := binary.BigEndian.Uint32(b[4:8]); bs == 2 || bs == 3 {
				detail = "GGUF file is big-endian; llama.cpp on this machine needs a little-endian file"
			}
			return &HeaderError{Kind: "version", Detail: detail}
		}
		return nil
	}
	if e := sniff(b); e != nil {
		return e
	}
	return &HeaderError{Kind: "magic", Detail: fmt.Sprintf("not a GGUF model: starts with %s, not \"GGUF\"", quote(b, 16))}
}

// ErrorBody reports whether b, the first bytes of a download, is an error
// page rather than file content: HTML, Hugging Face's "Entry not found", a
// JSON error object or a Git-LFS pointer. It applies to any file, GGUF or
// not, and returns nil when b looks like content.
func ErrorBody(b []byte) error {
	if e := sniff(b); e != nil {
		return e
	}
	return nil
}

// sniff matches b against the bodies servers send instead of a file. b may
// be shorter than the pattern (Quick reads only 8 bytes): a prefix counts.
func sniff(b []byte) *HeaderError {
	t := bytes.TrimLeft(b, " \t\r\n\ufeff")
	if len(t) == 0 {
		return nil
	}
	switch {
	case prefixEither(t, "Entry not found"):
		return &HeaderError{Kind: "entry-not-found", Detail: `Hugging Face's "Entry not found" page, not a model: the file does not exist at that URL`}
	case prefixEither(t, "version https://git-lfs"):
		return &HeaderError{Kind: "git-lfs", Detail: "a Git-LFS pointer, not a model: the repository was cloned without git-lfs; download the file itself"}
	case t[0] == '<' && looksHTML(t):
		return &HeaderError{Kind: "html", Detail: fmt.Sprintf("an HTML page, not a model (a login, error or redirect page): starts with %s", quote(t, 24))}
	case t[0] == '{' && looksJSON(t):
		return &HeaderError{Kind: "json", Detail: fmt.Sprintf("a JSON error message, not a model: %s", quote(t, 120))}
	}
	return nil
}

func prefixEither(b []byte, pattern string) bool {
	n := min(len(b), len(pattern))
	return n >= 4 && string(b[:n]) == pattern[:n]
}

func looksHTML(t []byte) bool {
	if len(t) < 2 {
		return false
	}
	c := t[1]
	// "<!DOCTYPE", "<html", "<?xml", "<head", "<body", "<h1"...: a tag
	// starts with a letter, '!' or '?'. Binary data starting with '<' and
	// a byte that cannot open a tag is left to the magic check.
	return c == '!' || c == '?' || c == '/' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func looksJSON(t []byte) bool {
	if len(t) < 2 {
		return true
	}
	r := bytes.TrimLeft(t[1:], " \t\r\n")
	return len(r) == 0 || r[0] == '"' || r[0] == '}'
}

// quote shows at most n bytes of b as a Go-quoted string, so binary
// garbage and control characters cannot reach a terminal raw.
func quote(b []byte, n int) string {
	cut := len(b) > n
	if cut {
		b = b[:n]
	}
	s := fmt.Sprintf("%q", b)
	if cut {
		s = strings.TrimSuffix(s, `"`) + `..."`
	}
	return s
}
