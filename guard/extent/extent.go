// Package extent reads where a file's own headers say it ends. A file a
// writer was killed in the middle of is shorter than that: the ELF header
// lists the segments, sections and header tables with their offsets and
// sizes, and an ar archive gives each member its size. Both are read from
// the headers alone (a few hundred bytes for ELF, 60 bytes a member for
// ar), so telling a whole file from a cut one costs nothing like reading
// it. guard's check of its own copy (install.CopyProblem) and the scrub
// after an interrupted build (builds) share it.
package extent

import (
	"encoding/binary"
	"io"
	"strconv"
	"strings"
)

// ELF returns the offset where the last segment, section or header
// table of the ELF file f ends: a file shorter than that was cut off. A
// file that starts with the ELF magic but not with a whole ELF header has
// the header's size as its extent. ok is false when f does not start with
// the ELF magic, or its header cannot be read as one (then nothing is
// known about its end).
func ELF(f io.ReaderAt) (end int64, ok bool) {
	var h [64]byte
	n, _ := f.ReadAt(h[:], 0)
	if n < 6 || string(h[:4]) != "\x7fELF" {
		return 0, false
	}
	var bo binary.ByteOrder
	switch h[5] {
	case 1:
		bo = binary.LittleEndian
	case 2:
		bo = binary.BigEndian
	default:
		return 0, false
	}
	wide := h[4] == 2
	switch {
	case !wide && h[4] != 1:
		return 0, false
	case wide && n < 64:
		return 64, true
	case n < 52:
		return 52, true
	}
	// Field offsets of the 32- and 64-bit layouts (elf(5)).
	var phoff, shoff uint64
	var phent, phnum, shent, shnum uint16
	if wide {
		phoff, shoff = bo.Uint64(h[0x20:]), bo.Uint64(h[0x28:])
		phent, phnum, shent, shnum = bo.Uint16(h[0x36:]), bo.Uint16(h[0x38:]), bo.Uint16(h[0x3A:]), bo.Uint16(h[0x3C:])
	} else {
		phoff, shoff = uint64(bo.Uint32(h[0x1C:])), uint64(bo.Uint32(h[0x20:]))
		phent, phnum, shent, shnum = bo.Uint16(h[0x2A:]), bo.Uint16(h[0x2C:]), bo.Uint16(h[0x2E:]), bo.Uint16(h[0x30:])
	}
	last := max(phoff+uint64(phent)*uint64(phnum), shoff+uint64(shent)*uint64(shnum))
	// Each program header: p_offset and p_filesz. Each section header:
	// sh_type (SHT_NOBITS takes no room in the file), sh_offset, sh_size.
	table := func(off uint64, ent, num uint16, read func(e []byte) uint64) bool {
		if num == 0 {
			return true
		}
		if ent == 0 || uint64(ent)*uint64(num) > 1<<20 || off > 1<<62 {
			return false
		}
		buf := make([]byte, int(ent)*int(num))
		if _, err := f.ReadAt(buf, int64(off)); err != nil {
			return true // the table itself is cut off: last already says so
		}
		for i := 0; i+int(ent) <= len(buf); i += int(ent) {
			last = max(last, read(buf[i:i+int(ent)]))
		}
		return true
	}
	const shtNobits = 8
	var okP, okS bool
	if wide {
		okP = phent >= 0x28 && table(phoff, phent, phnum, func(e []byte) uint64 { return bo.Uint64(e[0x08:]) + bo.Uint64(e[0x20:]) })
		okS = shent >= 0x28 && table(shoff, shent, shnum, func(e []byte) uint64 {
			if bo.Uint32(e[0x04:]) == shtNobits {
				return 0
			}
			return bo.Uint64(e[0x18:]) + bo.Uint64(e[0x20:])
		})
	} else {
		okP = phent >= 0x14 && table(phoff, phent, phnum, func(e []byte) uint64 { return uint64(bo.Uint32(e[0x04:])) + uint64(bo.Uint32(e[0x10:])) })
		okS = shent >= 0x18 && table(shoff, shent, shnum, func(e []byte) uint64 {
			if bo.Uint32(e[0x04:]) == shtNobits {
				return 0
			}
			return uint64(bo.Uint32(e[0x10:])) + uint64(bo.Uint32(e[0x14:]))
		})
	}
	if !okP && phnum > 0 || !okS && shnum > 0 || last > 1<<62 {
		return 0, false
	}
	return int64(last), true
}

// arMagic starts an ar archive whose members' data it holds (ar(5)); a
// thin archive ("!<thin>\n") holds only their names and is not read.
const arMagic = "!<arch>\n"

// Archive returns where the last member of the ar archive f, size bytes
// long, ends, when that is past size: the archive was cut off. It walks
// the 60-byte member headers (name, dates, ids, mode, a decimal size, then
// "`\n"); each member's data follows its header and is padded to an even
// offset. An archive cut exactly between two members is told by its
// symbol table, the first member "/" that ar and ranlib write: it gives
// the offset of the member defining each symbol, and one at or past the
// end is a member cut off. cut is false for a whole archive and for a
// file that is not one, or whose headers are not ar's (nothing is known
// about its end).
func Archive(f io.ReaderAt, size int64) (end int64, cut bool) {
	var hdr [60]byte
	if n, _ := f.ReadAt(hdr[:len(arMagic)], 0); n < len(arMagic) || string(hdr[:len(arMagic)]) != arMagic {
		return 0, false
	}
	const maxMembers = 1 << 20 // bounds the walk of a hostile file made of empty members
	off := int64(len(arMagic))
	for range maxMembers {
		if off >= size {
			return 0, false // the last member ends where the file does (a missing pad byte is forgiven)
		}
		n, _ := f.ReadAt(hdr[:], off)
		if n < len(hdr) {
			return off + int64(len(hdr)), true // a member header cut off
		}
		if string(hdr[58:60]) != "`\n" {
			return 0, false
		}
		sz, err := strconv.ParseInt(strings.TrimRight(string(hdr[48:58]), " "), 10, 64)
		if err != nil || sz < 0 || sz > 1<<62 {
			return 0, false
		}
		data := off + int64(len(hdr)) + sz
		if data > size {
			return data, true
		}
		if off == int64(len(arMagic)) && string(hdr[:16]) == "/               " {
			if end := armapExtent(f, off+int64(len(hdr)), sz); end > size {
				return end, true
			}
		}
		off = data + data&1
	}
	return 0, false
}

// armapExtent reads the System V symbol table of an ar archive, the member
// data at off, sz bytes long: a big-endian count, then that many big-endian
// member offsets. It returns where the smallest member it names would end
// at the least (the member's header), past the furthest offset; 0 when the
// table does not read as one.
func armapExtent(f io.ReaderAt, off, sz int64) int64 {
	var b [4]byte
	if sz < 4 {
		return 0
	}
	if _, err := f.ReadAt(b[:], off); err != nil {
		return 0
	}
	n := int64(binary.BigEndian.Uint32(b[:]))
	if n == 0 || 4+4*n > sz || n > 1<<20 {
		return 0
	}
	buf := make([]byte, 4*n)
	if _, err := f.ReadAt(buf, off+4); err != nil {
		return 0
	}
	var last int64
	for i := 0; i < len(buf); i += 4 {
		last = max(last, int64(binary.BigEndian.Uint32(buf[i:])))
	}
	return last + 60
}
