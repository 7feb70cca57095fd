// Package elfpath makes a build's binaries answer from another folder.
// CMake links a binary in its build tree with the absolute path of the
// folders its libraries are in (its default build RPATH), so an entry of
// the stash made at one checkout path finds its libraries only at that
// path: restored at another, it loads nothing and the build runs again
// (docs/stash.md, "Another checkout path"). Plan finds each absolute
// folder of a binary's DT_RUNPATH and DT_RPATH that the caller says is in
// the build's outputs, and the bytes that rewrite it in place as
// $ORIGIN-relative, the form ld.so resolves from the binary's own folder.
// The rewritten string is never longer than the absolute one it replaces
// (the rest is padded with NULs), so no section moves; one that would not
// fit, or whose bytes another string shares, is kept and said.
//
// It reads files a build made, which may be anything: every offset is
// bounded, debug/elf's panics become errors, and FuzzPlan feeds it
// garbage.
package elfpath

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// Patch is bytes to write at Off in the file.
type Patch struct {
	Off  int64
	Data []byte
}

// Result is what Plan found: the patches, and each path entry that points
// into the outputs and stays absolute, with why.
type Result struct {
	Patches []Patch
	Kept    []string // "RUNPATH /abs/build/bin: why"
}

// maxTable bounds the tables read whole (the dynamic section, its string
// table, the dynamic symbols and version records): a few MB in the largest
// binaries.
const maxTable = 64 << 20

// Plan reads the ELF file r and returns the patches that rewrite, in place,
// each absolute entry of its DT_RUNPATH and DT_RPATH for which origin
// returns a replacement (its $ORIGIN-relative form); an entry origin
// returns none for is kept, and listed in Kept when origin says why. A file
// that is not ELF, or has no dynamic section or section headers, needs no
// patch: no error.
func Plan(r io.ReaderAt, origin func(dir string) (to, why string)) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, fmt.Errorf("parse ELF: %v", p)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		// Not ELF, cut short, or not one debug/elf reads: nothing to
		// rewrite (a read error shows again when the file is copied).
		return Result{}, nil
	}
	dyn := f.SectionByType(elf.SHT_DYNAMIC)
	if dyn == nil || dyn.Link == 0 || int(dyn.Link) >= len(f.Sections) || dyn.Size > maxTable {
		return Result{}, nil
	}
	strSec := f.Sections[dyn.Link]
	if strSec.Type != elf.SHT_STRTAB || strSec.Size > maxTable {
		return Result{}, nil
	}
	strtab, err := strSec.Data()
	if err != nil {
		return Result{}, err
	}
	dynData, err := dyn.Data()
	if err != nil {
		return Result{}, err
	}
	entries := dynEntries(f, dynData)
	refs := stringRefs(f, strSec, entries)
	for _, e := range entries {
		tag := "RUNPATH"
		switch e.tag {
		case elf.DT_RUNPATH:
		case elf.DT_RPATH:
			tag = "RPATH"
		default:
			continue
		}
		if e.val >= uint64(len(strtab)) {
			continue
		}
		start := int(e.val)
		end := bytes.IndexByte(strtab[start:], 0)
		if end < 0 {
			continue // not terminated: not a string ld.so would read either
		}
		old := string(strtab[start : start+end])
		parts := strings.Split(old, ":")
		changed := false
		for i, d := range parts {
			if !strings.HasPrefix(d, "/") {
				continue
			}
			to, why := origin(d)
			switch {
			case to != "" && to != d:
				parts[i], changed = to, true
			case why != "":
				res.Kept = append(res.Kept, fmt.Sprintf("%s %s: %s", tag, d, why))
			}
		}
		if !changed {
			continue
		}
		repl := strings.Join(parts, ":")
		switch {
		case len(repl) > len(old):
			res.Kept = append(res.Kept, fmt.Sprintf("%s %s: %s is longer and would not fit in place", tag, old, repl))
			continue
		case start > 0 && strtab[start-1] != 0, sharedTail(refs, start, start+end):
			res.Kept = append(res.Kept, fmt.Sprintf("%s %s: the linker shares its bytes with another name", tag, old))
			continue
		}
		data := make([]byte, len(old))
		copy(data, repl) // the rest stays NUL: the string ends earlier
		res.Patches = append(res.Patches, Patch{Off: int64(strSec.Offset) + int64(start), Data: data})
	}
	return res, nil
}

// dynEntry is one entry of the dynamic section.
type dynEntry struct {
	tag elf.DynTag
	val uint64
}

func dynEntries(f *elf.File, data []byte) []dynEntry {
	size := 16
	if f.Class == elf.ELFCLASS32 {
		size = 8
	}
	var out []dynEntry
	for off := 0; off+size <= len(data); off += size {
		var e dynEntry
		if size == 16 {
			e = dynEntry{elf.DynTag(f.ByteOrder.Uint64(data[off:])), f.ByteOrder.Uint64(data[off+8:])}
		} else {
			e = dynEntry{elf.DynTag(f.ByteOrder.Uint32(data[off:])), uint64(f.ByteOrder.Uint32(data[off+4:]))}
		}
		if e.tag == elf.DT_NULL {
			break
		}
		out = append(out, e)
	}
	return out
}

// stringRefs lists the offsets into the string table strSec that something
// other than a path entry names: the dynamic section's other strings, the
// dynamic symbols' names and the version records' names. A linker may
// point one of them into the tail of another string (a suffix shared),
// which an in-place rewrite would change.
func stringRefs(f *elf.File, strSec *elf.Section, entries []dynEntry) []uint64 {
	var refs []uint64
	for _, e := range entries {
		switch e.tag {
		case elf.DT_NEEDED, elf.DT_SONAME, elf.DT_AUXILIARY, elf.DT_FILTER, elf.DT_RPATH, elf.DT_RUNPATH:
			refs = append(refs, e.val)
		}
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOBITS || s.Size > maxTable || int(s.Link) >= len(f.Sections) || f.Sections[s.Link] != strSec {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		switch s.Type {
		case elf.SHT_DYNSYM, elf.SHT_SYMTAB:
			size := 24
			if f.Class == elf.ELFCLASS32 {
				size = 16
			}
			for off := 0; off+size <= len(data); off += size {
				refs = append(refs, uint64(f.ByteOrder.Uint32(data[off:])))
			}
		case elf.SHT_GNU_VERNEED:
			refs = append(refs, verneedRefs(f.ByteOrder, data)...)
		case elf.SHT_GNU_VERDEF:
			refs = append(refs, verdefRefs(f.ByteOrder, data)...)
		}
	}
	return refs
}

// maxRecords bounds the walk of a version section's linked records, all
// of them together: a hostile chain costs no more than this many steps.
const maxRecords = 1 << 16

// verneedRefs reads the file and version names of .gnu.version_r: records
// of vn_version(2) vn_cnt(2) vn_file(4) vn_aux(4) vn_next(4), each with
// aux records of vna_hash(4) vna_flags(2) vna_other(2) vna_name(4)
// vna_next(4).
func verneedRefs(bo binary.ByteOrder, data []byte) []uint64 {
	var refs []uint64
	n := 0
	for off := 0; off >= 0 && off+16 <= len(data) && n < maxRecords; n++ {
		refs = append(refs, uint64(bo.Uint32(data[off+4:])))
		for aux := off + int(bo.Uint32(data[off+8:])); aux >= off && aux+16 <= len(data) && n < maxRecords; n++ {
			refs = append(refs, uint64(bo.Uint32(data[aux+8:])))
			next := int(bo.Uint32(data[aux+12:]))
			if next == 0 {
				break
			}
			aux += next
		}
		next := int(bo.Uint32(data[off+12:]))
		if next == 0 {
			break
		}
		off += next
	}
	return refs
}

// verdefRefs reads the version names of .gnu.version_d: records of
// vd_version(2) vd_flags(2) vd_ndx(2) vd_cnt(2) vd_hash(4) vd_aux(4)
// vd_next(4), each with aux records of vda_name(4) vda_next(4).
func verdefRefs(bo binary.ByteOrder, data []byte) []uint64 {
	var refs []uint64
	n := 0
	for off := 0; off >= 0 && off+20 <= len(data) && n < maxRecords; n++ {
		for aux := off + int(bo.Uint32(data[off+12:])); aux >= off && aux+8 <= len(data) && n < maxRecords; n++ {
			refs = append(refs, uint64(bo.Uint32(data[aux:])))
			next := int(bo.Uint32(data[aux+4:]))
			if next == 0 {
				break
			}
			aux += next
		}
		next := int(bo.Uint32(data[off+16:]))
		if next == 0 {
			break
		}
		off += next
	}
	return refs
}

// sharedTail reports whether a reference points into the string at
// [start, end) past its first byte: a name sharing its tail.
func sharedTail(refs []uint64, start, end int) bool {
	for _, r := range refs {
		if r > uint64(start) && r <= uint64(end) {
			return true
		}
	}
	return false
}

// Apply returns r with the patches written over its bytes as they are
// read: the file rewritten on its way into the stash, its own bytes left
// as they are.
func Apply(r io.Reader, patches []Patch) io.Reader {
	if len(patches) == 0 {
		return r
	}
	return &patched{r: r, patches: patches}
}

type patched struct {
	r       io.Reader
	off     int64
	patches []Patch
}

func (p *patched) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	for _, pt := range p.patches {
		// The overlap of [p.off, p.off+n) and the patch.
		from, to := max(pt.Off, p.off), min(pt.Off+int64(len(pt.Data)), p.off+int64(n))
		if from < to {
			copy(b[from-p.off:to-p.off], pt.Data[from-pt.Off:to-pt.Off])
		}
	}
	p.off += int64(n)
	return n, err
}
