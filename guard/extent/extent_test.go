package extent_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/extent"
)

// The test's own executable is a whole ELF file: its extent is its size at
// most, and any cut shorter than the extent is seen.
func TestELF(t *testing.T) {
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	end, ok := extent.ELF(bytes.NewReader(exe))
	if !ok || end > int64(len(exe)) || end < int64(len(exe))/2 {
		t.Fatalf("ELF(whole) = %d, %v; the file is %d bytes", end, ok, len(exe))
	}
	for _, n := range []int{len(exe) - 1, len(exe) / 2, 64, 63, 20, 6} {
		cut := exe[:min(n, int(end)-1)]
		if got, ok := extent.ELF(bytes.NewReader(cut)); !ok || got <= int64(len(cut)) {
			t.Errorf("ELF(first %d bytes) = %d, %v; want past the end", len(cut), got, ok)
		}
	}
	for _, not := range []string{"", "\x7fEL", "#!/bin/sh\n", "\x7fELF\x02\x03" + strings.Repeat("\x00", 60)} {
		if _, ok := extent.ELF(strings.NewReader(not)); ok {
			t.Errorf("ELF(%q) claims an extent", not)
		}
	}
}

// archive builds an ar archive: a symbol table naming each member's
// offset (as ar and ranlib write it), then the members, each padded to an
// even offset. It returns the archive and where each member begins.
func archive(members ...string) (string, []int) {
	header := func(name string, size int) string {
		return fmt.Sprintf("%-16s%-12d%-6d%-6d%-8s%-10d`\n", name, 0, 0, 0, "644", size)
	}
	pad := func(s string) string {
		if len(s)%2 == 1 {
			return s + "\n"
		}
		return s
	}
	symtab := 4 + 4*len(members)
	off := 8 + 60 + symtab + symtab%2
	var offsets []int
	var body strings.Builder
	for i, m := range members {
		offsets = append(offsets, off+body.Len())
		body.WriteString(pad(header(fmt.Sprintf("m%d.o/", i), len(m)) + m))
	}
	table := make([]byte, symtab)
	table[3] = byte(len(members))
	for i, o := range offsets {
		table[4+4*i], table[5+4*i], table[6+4*i], table[7+4*i] = byte(o>>24), byte(o>>16), byte(o>>8), byte(o)
	}
	return "!<arch>\n" + pad(header("/", symtab)+string(table)) + body.String(), offsets
}

func TestArchive(t *testing.T) {
	ar, offsets := archive("first member", "odd", "last one")
	cut := func(s string) bool {
		_, c := extent.Archive(strings.NewReader(s), int64(len(s)))
		return c
	}
	if cut(ar) || cut(strings.TrimSuffix(ar, "\n")) {
		t.Fatalf("a whole archive (or one without its last pad byte) is taken for cut")
	}
	for name, n := range map[string]int{
		"inside the last member's data":  len(ar) - 3,
		"inside a member header":         offsets[2] + 30,
		"between two members":            offsets[2],
		"between the first two members":  offsets[1],
		"inside the symbol table":        8 + 60 + 2,
		"inside the symbol table header": 8 + 20,
	} {
		if !cut(ar[:n]) {
			t.Errorf("an archive cut %s (at %d of %d) is taken for whole", name, n, len(ar))
		}
	}
	for _, not := range []string{"", "!<thin>\n", "not an archive", "!<arch>\n" + strings.Repeat("x", 60)} {
		if cut(not) {
			t.Errorf("Archive(%q) says cut", not)
		}
	}
}

// Whatever the bytes, the readers answer without a panic, and a cut they
// report lies past the file's end.
func FuzzExtent(f *testing.F) {
	ar, _ := archive("a", "bc")
	f.Add([]byte(ar))
	f.Add([]byte("\x7fELF\x02\x01\x01" + strings.Repeat("\x00", 57)))
	f.Add([]byte("\x7fELF\x01\x02\x01" + strings.Repeat("\xff", 60)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if end, ok := extent.ELF(bytes.NewReader(b)); ok && end < 0 {
			t.Fatalf("ELF = %d", end)
		}
		if end, cut := extent.Archive(bytes.NewReader(b), int64(len(b))); cut && end <= int64(len(b)) {
			t.Fatalf("Archive = %d, cut, for %d bytes", end, len(b))
		}
	})
}
