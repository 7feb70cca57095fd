package stash

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/state"
)

// placer puts an entry's files in place below root, all or none: every
// file is first written to a temporary file beside its target (O_EXCL,
// O_NOFOLLOW, synced, its mode set) and checked against its sha256; only
// when all are, each is renamed over its target. Folders are walked with
// openat and O_NOFOLLOW from root down, so a link planted in the build
// folder is never written through: it is an error, and the build runs.
type placer struct {
	root   string
	dirs   map[string]int // folder below root -> open descriptor
	swept  map[int][]string
	staged []staged
}

type staged struct {
	dir       int
	tmp, name string
}

func newPlacer(root string) *placer {
	return &placer{root: root, dirs: map[string]int{}, swept: map[int][]string{}}
}

// dir opens (creating it when absent) the folder rel below root.
func (p *placer) dir(rel string) (int, error) {
	if fd, ok := p.dirs[rel]; ok {
		return fd, nil
	}
	var fd int
	var err error
	if rel == "." {
		// The recipe's dir is the person's path: it may be a link.
		fd, err = unix.Open(p.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	} else {
		var parent int
		if parent, err = p.dir(path.Dir(rel)); err != nil {
			return -1, err
		}
		base := path.Base(rel)
		flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		fd, err = unix.Openat(parent, base, flags, 0)
		if err == unix.ENOENT {
			if err = unix.Mkdirat(parent, base, 0o755); err == nil || err == unix.EEXIST {
				fd, err = unix.Openat(parent, base, flags, 0)
			}
		}
		if err == unix.ELOOP || err == unix.ENOTDIR {
			return -1, fmt.Errorf("%s/%s is not a folder (a link or a file is in its place)", p.root, rel)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("open %s/%s: %w", p.root, rel, err)
	}
	p.dirs[rel] = fd
	return fd, nil
}

// stage writes f from r to a temporary file beside its target.
func (p *placer) stage(f File, r io.Reader) error {
	dfd, err := p.dir(path.Dir(f.Path))
	if err != nil {
		return err
	}
	name := path.Base(f.Path)
	prefix := state.TempPrefix + name[:min(len(name), 64)] + "-"
	p.sweep(dfd, prefix)
	tmp := prefix + strconv.FormatUint(rand.Uint64(), 36)
	if f.IsLink() {
		if err := unix.Symlinkat(f.Link, dfd, tmp); err != nil {
			return fmt.Errorf("make the link %s: %w", f.Path, err)
		}
		p.staged = append(p.staged, staged{dfd, tmp, name})
		return nil
	}
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create a temporary file for %s: %w", f.Path, err)
	}
	p.staged = append(p.staged, staged{dfd, tmp, name})
	out := os.NewFile(uintptr(fd), tmp)
	defer out.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), damagedReader{io.LimitReader(r, f.Size)})
	switch {
	case err != nil:
		return fmt.Errorf("unpack %s: %w", f.Path, err)
	case n != f.Size:
		return fmt.Errorf("unpack %s: %w: cut short (%d of %d bytes)", f.Path, errDamaged, n, f.Size)
	case hex.EncodeToString(h.Sum(nil)) != f.SHA256:
		return fmt.Errorf("unpack %s: %w: sha256 mismatch", f.Path, errDamaged)
	}
	if err := out.Chmod(f.Mode.Perm()); err != nil {
		return fmt.Errorf("unpack %s: %w", f.Path, err)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("unpack %s: %w", f.Path, err)
	}
	return nil
}

// sweep removes from the folder dfd the temporary files named as stage
// names those of a file (prefix): what a restore killed before its commit
// left there. The caller holds the recipe's build lock, so no other
// restore is writing them. The folder is listed once.
func (p *placer) sweep(dfd int, prefix string) {
	names, ok := p.swept[dfd]
	if !ok {
		if dup, err := unix.Dup(dfd); err == nil {
			d := os.NewFile(uintptr(dup), p.root)
			names, _ = d.Readdirnames(-1)
			d.Close()
		}
		p.swept[dfd] = names
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			_ = unix.Unlinkat(dfd, n, 0)
		}
	}
}

// errDamaged marks a failure of the entry itself (its stream or a file's
// sha256), which removes it; a failure to write is the build folder's.
var errDamaged = errors.New("damaged entry")

// damagedReader marks the errors of the entry's stream as errDamaged.
type damagedReader struct{ r io.Reader }

func (d damagedReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errDamaged, err)
	}
	return n, err
}

// commit renames every staged file over its target and syncs the folders.
func (p *placer) commit() error {
	for i, s := range p.staged {
		if err := unix.Renameat(s.dir, s.tmp, s.dir, s.name); err != nil {
			p.staged = p.staged[i:]
			return fmt.Errorf("put %s in place: %w", s.name, err)
		}
	}
	p.staged = nil
	var errs []error
	for _, fd := range p.dirs {
		if err := unix.Fsync(fd); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// close removes what was staged and not committed, and closes the folders.
func (p *placer) close() {
	for _, s := range p.staged {
		_ = unix.Unlinkat(s.dir, s.tmp, 0)
	}
	for _, fd := range p.dirs {
		unix.Close(fd)
	}
}

// underOutputs reports whether the slash path rel is below one of the
// recipe's output folders: the only place a restore writes.
func underOutputs(rel string, outputs []string) bool {
	for _, o := range outputs {
		if strings.HasPrefix(rel, path.Clean(o)+"/") {
			return true
		}
	}
	return false
}
