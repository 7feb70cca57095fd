package state

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// TempPrefix starts the name of every temporary file the writers here
// create next to the file they replace; a folder guard sweeps (the prompt
// cache) knows its leftovers by it.
const TempPrefix = ".tmp-"

// maxLinks bounds how many symlinks WriteAtomic follows, as the kernel
// bounds a lookup (ELOOP).
const maxLinks = 40

// WriteAtomic replaces the file at path with data, for files a person owns
// and may have arranged (the manifest, ~/.bashrc): a reader, or a crash,
// sees the old file or the new one, never a mix. The data goes to a
// temporary file in the same folder (created exclusively, 0600 while it is
// written), which is synced and renamed over path, and the folder is synced
// so the rename survives a crash.
//
// A file already at path keeps its mode and, where the process may change
// it, its owner and group; mode applies to a new file only. A symlink at
// path (a dotfiles manager's ~/.bashrc) stays a link: its final target is
// replaced, next to that target, and a dangling link's target is created.
// The folder must exist. What the path leads to and is not a regular file
// (a ~/.bashrc linked to /dev/null or a FIFO) is refused (ErrNotRegular),
// never replaced: renaming over it would replace the device itself.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	return WriteAtomicIf(path, data, mode, nil)
}

// WriteAtomicIf is WriteAtomic with a last check: check runs once the new
// file is written and synced, right before the rename, and an error from
// it leaves path as it is (the temporary file removed) and is returned.
// A person's file that a program of theirs rewrites by its own rename
// (OpenClaw's config) is then replaced only while it still holds what the
// edit was made from.
func WriteAtomicIf(path string, data []byte, mode os.FileMode, check func() error) error {
	target, err := finalTarget(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	a := attrs{mode: mode, check: check}
	if fi, err := os.Lstat(target); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("write %s: %w", path, &fs.PathError{Op: "replace", Path: target, Err: ErrNotRegular})
		}
		a.mode = fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			a.owner, a.uid, a.gid = true, int(st.Uid), int(st.Gid)
		}
	}
	return write(target, data, a)
}

// Replace is WriteAtomic for guard's own files (stamps, failure records,
// cache entries, guard's copy in the shim folder): path itself is replaced,
// a symlink there included, never followed, and the new file has exactly
// mode, whatever was there before. The folder must exist.
func Replace(path string, data []byte, mode os.FileMode) error {
	return write(path, data, attrs{mode: mode})
}

// attrs is what the new file gets besides its data.
type attrs struct {
	mode     os.FileMode
	owner    bool // set uid and gid
	uid, gid int
	check    func() error // WriteAtomicIf's, before the rename
}

func write(path string, data []byte, a attrs) error {
	dir := filepath.Dir(path)
	f, tmp, err := createTemp(dir, filepath.Base(path))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fill(f, data, a); err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, bare(err))
	}
	if a.check != nil {
		if err := a.check(); err != nil {
			_ = os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, bare(err))
	}
	// Without this a crash could forget the rename; the old file would
	// then simply still be there, so a failure is not worth reporting.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// fill writes data, the owner and the mode to the open temporary file, then
// syncs it. The owner goes first: a chown clears the set-id bits.
func fill(f *os.File, data []byte, a attrs) error {
	if _, err := f.Write(data); err != nil {
		return bare(err)
	}
	if a.owner {
		chownLike(f, a.uid, a.gid)
	}
	if err := f.Chmod(a.mode); err != nil {
		return bare(err)
	}
	return bare(f.Sync())
}

// chownLike gives f the owner and group uid and gid where it can: only root
// may give a file away, but any user may pass it to a group of theirs.
// Failing both leaves the file ours, which is all an unprivileged writer
// could ever make.
func chownLike(f *os.File, uid, gid int) {
	fi, err := f.Stat()
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == uid && int(st.Gid) == gid) {
		return
	}
	if f.Chown(uid, gid) != nil && int(st.Gid) != gid {
		_ = f.Chown(-1, gid)
	}
}

// createTemp creates an empty file next to the one named base, with
// O_EXCL and O_NOFOLLOW so that nothing planted under the name is opened.
func createTemp(dir, base string) (*os.File, string, error) {
	if len(base) > 64 { // room for the prefix and suffix within NAME_MAX
		base = base[:64]
	}
	for range 100 {
		name := filepath.Join(dir, TempPrefix+base+"-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("create a temporary file: %w", bare(err))
		}
		return f, name, nil
	}
	return nil, "", fmt.Errorf("create a temporary file in %s: %w", dir, fs.ErrExist)
}

// finalTarget follows path through its symlinks to the file they name,
// which need not exist yet.
func finalTarget(path string) (string, error) {
	for range maxLinks {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			// Relative to the link's real folder: "../x" in a folder reached
			// through a symlink means what the kernel says, not what the
			// spelling of path says.
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return "", err
			}
			link = filepath.Join(dir, link)
		}
		path = link
	}
	return "", &fs.PathError{Op: "follow", Path: path, Err: syscall.ELOOP}
}

// bare drops the path an *fs.PathError repeats: the messages here name the
// file being written, not its temporary name. errors.Is still sees the
// cause (ENOSPC, EROFS).
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
