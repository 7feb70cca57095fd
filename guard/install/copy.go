package install

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/sandbox-guard/guard/guard/state"
)

// CopyProblem says what is wrong with guard's copy at path, or "" when it
// is a whole executable. A sandbox that truncates large files can leave
// the copy empty, and a shell runs an empty executable as an empty script:
// every shim would then exit 0 having run nothing. A copy cut short
// elsewhere crashes where it is cut. Both are found from the ELF headers
// alone (a few hundred bytes): every segment and section they list must
// lie within the file.
func CopyProblem(path string) string {
	f, fi, err := state.OpenRegularStat(path, false)
	if err != nil {
		return "" // missing, or not a file: the caller's cases, not a broken copy
	}
	defer f.Close()
	switch {
	case fi.Size() == 0:
		return "empty (0 bytes)"
	case fi.Mode().Perm()&0o111 == 0:
		return "not executable"
	}
	need, ok := elfExtent(f)
	if !ok {
		return "not an ELF executable"
	}
	if fi.Size() < need {
		return fmt.Sprintf("cut off (%d of %d bytes)", fi.Size(), need)
	}
	return ""
}

// elfExtent returns the offset where the last segment, section or header
// table of the ELF file f ends; false when f does not start with an ELF
// header.
func elfExtent(f io.ReaderAt) (int64, bool) {
	var h [64]byte
	n, _ := f.ReadAt(h[:], 0)
	if n < 52 || string(h[:4]) != "\x7fELF" {
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
	if !wide && h[4] != 1 || wide && n < 64 {
		return 0, false
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
	end := max(phoff+uint64(phent)*uint64(phnum), shoff+uint64(shent)*uint64(shnum))
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
			return true // the table itself is cut off: end already says so
		}
		for i := 0; i+int(ent) <= len(buf); i += int(ent) {
			end = max(end, read(buf[i:i+int(ent)]))
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
	if !okP && phnum > 0 || !okS && shnum > 0 || end > 1<<62 {
		return 0, false
	}
	return int64(end), true
}
