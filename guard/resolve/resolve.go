// Package resolve finds the real tool behind a shim: the manifest's path, or
// the first match in PATH once the shim folder is taken out. Folders and files
// are compared by device and inode, not by string, so "~/.shim", "/root/.shim/"
// and a bind mount or symlinked folder of it are all recognised, and guard is
// never chosen as its own target, even through a second hard or soft link.
package resolve

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ID is a file's identity: device and inode.
type ID struct{ Dev, Ino uint64 }

// IDOf stats path (following links) and returns its identity.
func IDOf(path string) (ID, bool) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return ID{}, false
	}
	return ID{Dev: uint64(st.Dev), Ino: st.Ino}, true
}

// NotFoundError lists every place that was tried.
type NotFoundError struct {
	Name  string
	Tried []string
}

func (e *NotFoundError) Error() string {
	if len(e.Tried) == 0 {
		return "not found (PATH has no folder besides the shim folder)"
	}
	return "not found; tried " + strings.Join(e.Tried, ", ")
}

// NotExecutableError is a manifest path to a file that is there but that
// no one may execute: the shell's 126, not "not found". It matches
// syscall.EACCES, what exec would have said.
type NotExecutableError struct{ Path string }

func (e *NotExecutableError) Error() string { return e.Path + " is not executable" }
func (e *NotExecutableError) Unwrap() error { return syscall.EACCES }

// Query is what Real needs; nothing here reads the environment itself.
type Query struct {
	Name     string // the tool's name (argv[0] basename)
	Path     string // the manifest's path for it, "" when none
	PathEnv  string // $PATH
	ShimDir  string
	Self     ID   // guard's own executable
	HaveSelf bool // Self is valid
}

// Real returns the executable that a call of q.Name should run. A
// manifest path to a regular file without the execute bit is a
// *NotExecutableError; a PATH search passes over such a file, as a shell
// does.
func Real(q Query) (string, error) {
	if q.Path != "" {
		switch fi, err := os.Stat(q.Path); {
		case err != nil || !fi.Mode().IsRegular() || q.HaveSelf && idOf(fi) == q.Self:
		case fi.Mode().Perm()&0o111 == 0:
			return "", &NotExecutableError{Path: q.Path}
		default:
			return q.Path, nil
		}
		return "", &NotFoundError{Name: q.Name, Tried: []string{q.Path}}
	}
	shim, haveShim := IDOf(q.ShimDir)
	var tried []string
	seen := map[ID]bool{}
	for _, dir := range filepath.SplitList(q.PathEnv) {
		if dir == "" {
			dir = "." // POSIX: an empty PATH entry is the current folder
		}
		id, ok := IDOf(dir)
		if !ok || (haveShim && id == shim) || seen[id] {
			continue
		}
		seen[id] = true
		cand := filepath.Join(dir, q.Name)
		if q.isSelf(cand) {
			tried = append(tried, cand+" (guard itself)")
			continue
		}
		tried = append(tried, cand)
		if isExec(cand) {
			return cand, nil
		}
	}
	return "", &NotFoundError{Name: q.Name, Tried: tried}
}

func idOf(fi os.FileInfo) ID {
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil {
		return ID{}
	}
	return ID{Dev: uint64(st.Dev), Ino: st.Ino}
}

func (q Query) isSelf(path string) bool {
	if !q.HaveSelf {
		return false
	}
	id, ok := IDOf(path)
	return ok && id == q.Self
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
