package models

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// NotRegularError is a model path where something other than a regular
// file is: a FIFO (which would hold the call that opens it), a device, a
// socket, a folder. guard did not make it, so it never replaces it; the
// person removes it. It matches state.ErrNotRegular.
type NotRegularError struct {
	Path string
	What string // "a FIFO", "a folder", ...: Kind
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("model %s is %s, not a regular file", e.Path, e.What)
}

func (e *NotRegularError) Unwrap() error { return state.ErrNotRegular }

func notRegular(path string) error { return &NotRegularError{Path: path, What: Kind(path)} }

// refuseNotRegular is a heal's answer to a model path that is not a file:
// what is there, and that the person removes it.
func refuseNotRegular(path string) error {
	return fmt.Errorf("%w; guard replaces only files it made: remove it and the next call downloads the model", notRegular(path))
}

// Kind says what is at path when it is not a regular file, following
// links: "a FIFO", "a folder", "a socket", "a character device", "a block
// device", else "something else".
func Kind(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "something else"
	}
	switch m := fi.Mode(); {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "something else"
}

// maxLinks bounds the links destination follows, as the kernel bounds a
// lookup (ELOOP).
const maxLinks = 40

// destination is the file a heal of the model at path writes and locks:
// path itself, or, when path is a symlink (or a chain of them, dangling
// once the model was evicted), the file the chain ends at, so the link
// stays a link and every path to one file shares one lock and one
// download. Each folder on the way is resolved too. A relative link is
// read against its own link's folder.
//
// A link guard must not follow is an error, never followed blindly: one
// owned by another user (root's excepted: another user cannot plant one
// in their name), or a chain that ends in a folder of another user's
// (docs/security.md).
func destination(path string) (string, error) {
	cur, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	me := os.Geteuid()
	for hops := 0; ; hops++ {
		dir := realDir(filepath.Dir(cur))
		cur = filepath.Join(dir, filepath.Base(cur))
		fi, err := os.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			if hops > 0 {
				return cur, checkFolder(path, cur, me)
			}
			return cur, nil // no link: the path the person named
		}
		if hops == maxLinks {
			return "", fmt.Errorf("model %s: %w following its links", path, syscall.ELOOP)
		}
		if uid := ownerOf(fi); uid != me && uid != 0 {
			return "", fmt.Errorf("model %s is a symlink of uid %d; guard follows only links of its own user or root: remove it, or use the file's own path", cur, uid)
		}
		link, err := os.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("model %s: %w", path, err)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(dir, link)
		}
		cur = link
	}
}

// checkFolder refuses a link's target, dest, in a folder guard must not
// write to: one of another user's (root's excepted). A folder not made
// yet is judged by the nearest one that exists, which the download would
// make it in.
func checkFolder(path, dest string, me int) error {
	dir := filepath.Dir(dest)
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if uid := ownerOf(fi); uid != me && uid != 0 {
				return fmt.Errorf("model %s is a symlink to %s, in a folder of uid %d; guard downloads only into folders of its own user or root: fetch the model there yourself, or link to a folder of yours", path, dest, uid)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) || dir == filepath.Dir(dir) {
			return nil // the download will say what is wrong
		}
		dir = filepath.Dir(dir)
	}
}

// realDir is dir with its symlinks resolved, or dir as it is when it does
// not exist yet (nothing links to it then).
func realDir(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
