package install

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// Each tool name in the shim folder is a hard link to guard's copy there
// (a copy of it where the file system cannot make one): a path of its own
// that runs guard, so that what resolves a command to its real path and
// runs that path (OpenClaw's exec approvals) still calls guard by the
// tool's name, and an approval for one tool is not an approval for guard.
// docs/shells.md ("OpenClaw") and docs/decisions.md say why this shape.

// Kind is what a tool name in the shim folder is to guard.
type Kind int

const (
	// Missing: nothing there.
	Missing Kind = iota
	// Linked: guard's, as it should be: a hard link to guard's copy (the
	// same inode), or a copy with the copy's bytes and owner where a hard
	// link could not be made.
	Linked
	// Outdated: guard's, to be replaced: a symlink to guard's copy (what
	// installs made before each name had its own path), or a hard link to
	// or copy of a guard that has since been replaced (its own owner's
	// build of guard, or the very file the copy was before this run
	// replaced it).
	Outdated
	// Foreign: a file or link guard did not put there (someone else's, or
	// anything that is not a build of guard); left alone.
	Foreign
)

func (k Kind) String() string {
	return [...]string{"missing", "linked", "outdated", "foreign"}[k]
}

// guardFile is what a tool name is compared with: guard's copy in the
// shim folder, and the file the copy was before this run replaced it.
type guardFile struct {
	path     string
	st       syscall.Stat_t
	ok       bool // the copy is there, a regular file
	prev     syscall.Stat_t
	havePrev bool
}

// statCopy reads the identity of guard's copy in dir.
func statCopy(dir string) guardFile {
	g := guardFile{path: filepath.Join(dir, GuardName)}
	g.ok = syscall.Lstat(g.path, &g.st) == nil && g.st.Mode&syscall.S_IFMT == syscall.S_IFREG
	return g
}

// replacing records that the copy was before (what statCopy said before
// the copy was replaced): a tool name still holding that file is then
// Outdated, whatever its bytes (a copy truncated in place truncates every
// hard link to it).
func (g guardFile) replacing(before guardFile) guardFile {
	if before.ok {
		g.prev, g.havePrev = before.st, true
	}
	return g
}

// Classify says what dir/name is to guard (see Kind).
func Classify(dir, name string) Kind { return statCopy(dir).classify(dir, name) }

func (g guardFile) classify(dir, name string) Kind {
	p := filepath.Join(dir, name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		if err == syscall.ENOENT {
			return Missing
		}
		return Foreign
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFLNK:
		if isGuardSymlink(dir, name) {
			return Outdated
		}
		return Foreign
	case syscall.S_IFREG:
	default:
		return Foreign
	}
	if g.ok && st.Dev == g.st.Dev && st.Ino == g.st.Ino {
		return Linked
	}
	if g.havePrev && st.Dev == g.prev.Dev && st.Ino == g.prev.Ino {
		return Outdated
	}
	// Anything else is trusted only when it is its owner's: the copy's
	// owner (else the one running guard). A hard link to someone else's
	// file, whatever it holds, is theirs to change after guard checked it.
	owner := uint32(os.Geteuid())
	if g.ok {
		owner = g.st.Uid
	}
	if st.Uid != owner {
		return Foreign
	}
	if g.ok && st.Size == g.st.Size && sameBytes(p, g.path) {
		return Linked
	}
	if isGuardBuild(p) {
		return Outdated
	}
	return Foreign
}

// holds reports whether dir/name is guard's copy itself, under another
// name: a hard link to it.
func (g guardFile) holds(dir, name string) bool {
	var st syscall.Stat_t
	return g.ok && syscall.Lstat(filepath.Join(dir, name), &st) == nil && st.Dev == g.st.Dev && st.Ino == g.st.Ino
}

// isGuardSymlink reports whether dir/name is a symlink to guard's copy in
// dir, relative (as install wrote it) or absolute (as older installs did).
func isGuardSymlink(dir, name string) bool {
	t, err := os.Readlink(filepath.Join(dir, name))
	return err == nil && (t == GuardName || t == filepath.Join(dir, GuardName))
}

// IsGuards reports whether dir/name is guard's: a tool name linked to its
// copy, or one to be replaced by such a link.
func IsGuards(dir, name string) bool {
	k := Classify(dir, name)
	return k == Linked || k == Outdated
}

// sameBytes reports whether the regular files a and b hold the same bytes
// (neither followed if a link).
func sameBytes(a, b string) bool {
	fa, err := state.OpenRegular(a, true)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, err := state.OpenRegular(b, true)
	if err != nil {
		return false
	}
	defer fb.Close()
	ba, bb := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && ea == eb
		}
	}
}

// maxBuildInfo bounds what is read of an executable's .go.buildinfo
// section: a module path and its version, well under a kilobyte.
const maxBuildInfo = 64 << 10

// isGuardBuild reports whether the file at path is a build of guard: an
// ELF executable whose Go build information names guard's module (the one
// this guard was built from). Only the ELF headers and that section are
// read.
func isGuardBuild(path string) bool {
	mod := guardModule()
	if mod == "" {
		return false
	}
	f, err := state.OpenRegular(path, true)
	if err != nil {
		return false
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return false
	}
	s := ef.Section(".go.buildinfo")
	if s == nil || s.Type == elf.SHT_NOBITS {
		return false
	}
	data := make([]byte, min(s.Size, maxBuildInfo))
	n, _ := s.ReadAt(data, 0)
	return bytes.Contains(data[:n], []byte("\nmod\t"+mod+"\t"))
}

// guardModule is the module path this guard was built from.
func guardModule() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return bi.Main.Path
}

// linkTool makes dir/name a hard link to guard's copy, through a
// temporary name and a rename, so that a concurrent repair never sees a
// half-made entry and whatever was at the name (a symlink included) is
// replaced, never followed. Where the file system cannot make the link
// (none on it, too many links to one file) it writes a copy of guard's
// copy instead (state.Replace: O_EXCL|O_NOFOLLOW temporary, then rename).
// exe gives the copy's bytes, read only when needed.
func linkTool(dir, name string, exe func() ([]byte, error)) error {
	p := filepath.Join(dir, name)
	copyPath := filepath.Join(dir, GuardName)
	tmp := filepath.Join(dir, state.TempPrefix+name+"-"+strconv.FormatUint(rand.Uint64(), 36))
	err := hardLink(copyPath, tmp)
	if err == nil {
		err = os.Rename(tmp, p)
		// A rename between two links to one file does nothing and leaves
		// tmp: a concurrent repair made the same link meanwhile.
		_ = os.Remove(tmp)
		if err != nil {
			return fmt.Errorf("link %s: %w", p, err)
		}
		return nil
	}
	if !noHardLink(err) {
		return fmt.Errorf("link %s: %w", p, err)
	}
	data, rerr := exe()
	if rerr != nil {
		return fmt.Errorf("link %s: %w", p, rerr)
	}
	if werr := state.Replace(p, data, 0o755); werr != nil {
		return fmt.Errorf("link %s (a copy, since %v): %w", p, err, werr)
	}
	return nil
}

// hardLink is link(2); a test stands in a file system that refuses it.
var hardLink = os.Link

// noHardLink reports whether a link(2) error means the file system will
// not make this hard link, so a copy stands in for it.
func noHardLink(err error) bool {
	for _, e := range []error{syscall.EXDEV, syscall.EMLINK, syscall.EPERM, syscall.EOPNOTSUPP, syscall.ENOSYS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// copyBytes reads guard's copy in dir once, for the links that must be
// copies.
func copyBytes(dir string) func() ([]byte, error) {
	var data []byte
	var err error
	read := false
	return func() ([]byte, error) {
		if !read {
			data, err = state.ReadRegular(filepath.Join(dir, GuardName), maxGuard, true)
			read = true
		}
		return data, err
	}
}

// maxGuard bounds what is read of guard's copy to make a copy of it.
const maxGuard = 1 << 30
