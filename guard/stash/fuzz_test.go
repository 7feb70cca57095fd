package stash

import (
	"strings"
	"testing"
)

// FuzzParseEntry feeds the entry and index parsers garbage: they must
// return an error or a header that keeps their own limits, never panic.
func FuzzParseEntry(f *testing.F) {
	h := &header{Recipe: "llama-cpp", Key: strings.Repeat("ab", 32), Source: "git 1 dirty 2", Compiler: "cc 12",
		Files: []File{{Path: "build/bin/lib.so.0", Link: "lib.so.0.2"}, {Path: "build/bin/lib.so.0.2", Mode: 0o644, Size: 10, SHA256: strings.Repeat("0", 64)}}}
	f.Add(append(h.encode(), "\x28\xb5\x2f\xfd"...))
	f.Add([]byte(entryMagic + "\nrecipe \"x\"\nkey " + strings.Repeat("a", 64) + "\nsource \"\"\ncompiler \"\"\nfile 0755 99999999999 " + strings.Repeat("a", 64) + " \"../x\"\ndata\n"))
	f.Add(encodeIndex([]Item{{Recipe: "r", Key: strings.Repeat("1", 64), Size: 10, SHA256: strings.Repeat("2", 64)}}))
	f.Add([]byte(indexMagic + "\n" + strings.Repeat("a", 64) + " -1 x 0 \"\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, off, err := parseEntry(data); err == nil {
			if off > len(data) || len(h.Files) == 0 || len(h.Files) > maxFiles {
				t.Fatalf("header past its limits: %d files, offset %d of %d", len(h.Files), off, len(data))
			}
			var total int64
			for _, f := range h.Files {
				if checkPath(f.Path) != nil || f.Size < 0 {
					t.Fatalf("bad file accepted: %+v", f)
				}
				total += f.Size
			}
			if total > maxUnpacked {
				t.Fatalf("files claim %d bytes", total)
			}
			again, _, err := parseEntry(append(h.encode(), data[off:]...))
			if err != nil || len(again.Files) != len(h.Files) {
				t.Fatalf("a parsed header does not parse again: %v", err)
			}
		}
		if items, err := parseIndex(data); err == nil {
			again, err := parseIndex(encodeIndex(items))
			if err != nil || len(again) != len(items) {
				t.Fatalf("a parsed index does not parse again: %v", err)
			}
		}
	})
}
