package stash

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// An entry file is a short text header, then one zstd stream holding the
// files' bytes one after another in the header's order:
//
//	guard-stash 1
//	recipe "llama-cpp"
//	key 64-hex
//	source "git 1a2b… dirty 9f8e…"
//	compiler "cc (Debian 12.2.0-14) 12.2.0"
//	file 0755 123456 64-hex "build/bin/libllama.so.0.2.0"
//	link "libllama.so.0.2.0" "build/bin/libllama.so.0"
//	data
//
// Paths are relative to the recipe's dir, Go-quoted. The header is read
// with limits (its length, the number of files, the bytes they claim) so
// a hostile entry costs no more than a good one; FuzzParseEntry feeds it
// garbage.
//
// The index is one line per entry after its own first line:
//
//	guard-stash-index 1
//	64-hex-key size 64-hex-sha256 unix-nanoseconds "recipe"

const (
	entryMagic = "guard-stash 1"
	indexMagic = "guard-stash-index 1"

	maxHeader = 64 << 10 // bytes of an entry's header
	maxFiles  = 1024     // files in one entry
	// maxUnpacked bounds the bytes an entry's files may claim together:
	// llama.cpp's build/bin is 11 MB.
	maxUnpacked = 4 << 30
	maxIndex    = 1 << 20 // bytes of an index
)

// File is one file of an entry.
type File struct {
	Path   string      // relative to the recipe's dir, slash separated
	Mode   fs.FileMode // permission bits; a link has none
	Size   int64
	SHA256 string
	Link   string // a symlink's target; "" for a regular file
}

// IsLink reports whether f is a symlink.
func (f File) IsLink() bool { return f.Link != "" }

// header is what an entry says about itself.
type header struct {
	Recipe   string
	Key      string
	Source   string
	Compiler string
	Files    []File
}

var errFormat = errors.New("not a stash entry")

func formatError(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errFormat, fmt.Sprintf(format, a...))
}

func (h *header) encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nrecipe %s\nkey %s\nsource %s\ncompiler %s\n", entryMagic,
		strconv.Quote(h.Recipe), h.Key, strconv.Quote(h.Source), strconv.Quote(h.Compiler))
	for _, f := range h.Files {
		if f.IsLink() {
			fmt.Fprintf(&b, "link %s %s\n", strconv.Quote(f.Link), strconv.Quote(f.Path))
		} else {
			fmt.Fprintf(&b, "file %04o %d %s %s\n", f.Mode.Perm(), f.Size, f.SHA256, strconv.Quote(f.Path))
		}
	}
	b.WriteString("data\n")
	return b.Bytes()
}

// parseEntry reads an entry's header from data and returns it with the
// offset of the zstd stream.
func parseEntry(data []byte) (*header, int, error) {
	end := bytes.Index(data[:min(len(data), maxHeader)], []byte("\ndata\n"))
	if end < 0 {
		return nil, 0, formatError("no header end within %d bytes", maxHeader)
	}
	lines := strings.Split(string(data[:end]), "\n")
	if lines[0] != entryMagic {
		return nil, 0, formatError("first line %.40q", lines[0])
	}
	if len(lines) < 5 {
		return nil, 0, formatError("header cut short")
	}
	h := &header{}
	fields := []struct {
		name string
		to   *string
	}{{"recipe", &h.Recipe}, {"key", &h.Key}, {"source", &h.Source}, {"compiler", &h.Compiler}}
	for i, f := range fields {
		v, ok := strings.CutPrefix(lines[i+1], f.name+" ")
		if !ok {
			return nil, 0, formatError("line %d: want %s", i+2, f.name)
		}
		if f.name != "key" {
			var err error
			if v, err = unquoteAll(v); err != nil {
				return nil, 0, formatError("line %d: %v", i+2, err)
			}
		}
		*f.to = v
	}
	if !isHex64(h.Key) {
		return nil, 0, formatError("key %.70q is not 64 hex digits", h.Key)
	}
	var total int64
	for n, line := range lines[5:] {
		if len(h.Files) == maxFiles {
			return nil, 0, formatError("more than %d files", maxFiles)
		}
		f, err := parseFileLine(line)
		if err != nil {
			return nil, 0, formatError("line %d: %v", n+6, err)
		}
		if total += f.Size; total > maxUnpacked {
			return nil, 0, formatError("files claim more than %d bytes", int64(maxUnpacked))
		}
		h.Files = append(h.Files, f)
	}
	if len(h.Files) == 0 {
		return nil, 0, formatError("no files")
	}
	return h, end + len("\ndata\n"), nil
}

func parseFileLine(line string) (File, error) {
	kind, rest, _ := strings.Cut(line, " ")
	switch kind {
	case "link":
		target, rest, err := unquoteFirst(rest)
		if err != nil {
			return File{}, err
		}
		p, err := unquoteAll(strings.TrimPrefix(rest, " "))
		if err != nil {
			return File{}, err
		}
		if target == "" || strings.ContainsRune(target, 0) {
			return File{}, errors.New("empty link target")
		}
		return File{Path: p, Link: target}, checkPath(p)
	case "file":
		parts := strings.SplitN(rest, " ", 4)
		if len(parts) != 4 {
			return File{}, errors.New("want: file MODE SIZE SHA256 PATH")
		}
		mode, err := strconv.ParseUint(parts[0], 8, 32)
		if err != nil || mode > 0o777 {
			return File{}, fmt.Errorf("mode %.10q", parts[0])
		}
		size, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || size < 0 || size > maxUnpacked {
			return File{}, fmt.Errorf("size %.24q", parts[1])
		}
		if !isHex64(parts[2]) {
			return File{}, errors.New("sha256 is not 64 hex digits")
		}
		p, err := unquoteAll(parts[3])
		if err != nil {
			return File{}, err
		}
		return File{Path: p, Mode: fs.FileMode(mode), Size: size, SHA256: parts[2]}, checkPath(p)
	}
	return File{}, fmt.Errorf("unknown line %.20q", kind)
}

// checkPath accepts a clean relative path that stays below the recipe's
// dir; restore checks further that it is below an output folder.
func checkPath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("path %.80q is not a clean path below the recipe's dir", p)
	}
	return nil
}

func unquoteFirst(s string) (string, string, error) {
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", fmt.Errorf("bad quoting in %.40q", s)
	}
	v, _ := strconv.Unquote(q)
	return v, s[len(q):], nil
}

func unquoteAll(s string) (string, error) {
	v, rest, err := unquoteFirst(s)
	if err == nil && rest != "" {
		err = fmt.Errorf("text after the quoted value: %.20q", rest)
	}
	return v, err
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Item is one entry as the index lists it.
type Item struct {
	Recipe  string    `json:"recipe"`
	Key     string    `json:"key"`
	Size    int64     `json:"bytes"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
	// Pinned, from Save, says which files keep an absolute path into the
	// checkout and why: the entry answers only at this checkout path.
	Pinned []string `json:"-"`
}

// Name is the entry's file name: a hash of its recipe and key, so that no
// recipe name (a slash, a dot, a long one) is ever a path.
func (it Item) Name() string { return entryName(it.Recipe, it.Key) }

func encodeIndex(items []Item) []byte {
	var b bytes.Buffer
	b.WriteString(indexMagic + "\n")
	for _, it := range items {
		fmt.Fprintf(&b, "%s %d %s %d %s\n", it.Key, it.Size, it.SHA256, it.Created.UnixNano(), strconv.Quote(it.Recipe))
	}
	return b.Bytes()
}

// parseIndex reads an index; a line it cannot read is an error, since an
// index is only ever written whole.
func parseIndex(data []byte) ([]Item, error) {
	if len(data) > maxIndex {
		return nil, formatError("index over %d bytes", maxIndex)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxIndex)
	if !sc.Scan() || sc.Text() != indexMagic {
		return nil, formatError("not a stash index")
	}
	var items []Item
	for n := 2; sc.Scan(); n++ {
		parts := strings.SplitN(sc.Text(), " ", 5)
		if len(parts) != 5 {
			return nil, formatError("index line %d: want KEY SIZE SHA256 CREATED RECIPE", n)
		}
		size, err := strconv.ParseInt(parts[1], 10, 64)
		nanos, err2 := strconv.ParseInt(parts[3], 10, 64)
		recipe, err3 := unquoteAll(parts[4])
		if !isHex64(parts[0]) || !isHex64(parts[2]) || err != nil || size <= 0 || err2 != nil || err3 != nil || recipe == "" {
			return nil, formatError("index line %d", n)
		}
		items = append(items, Item{Recipe: recipe, Key: parts[0], Size: size, SHA256: parts[2], Created: time.Unix(0, nanos)})
	}
	if err := sc.Err(); err != nil {
		return nil, formatError("%v", err)
	}
	return items, nil
}
