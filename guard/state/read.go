package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is the error for a FIFO, a device, a socket or a folder
// where guard expects a file; ErrTooLarge for a file past its reader's
// limit; ErrNotOwned for another user's file where guard keeps its own.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
	ErrNotOwned   = errors.New("belongs to another user")
)

// OpenRegular opens path for reading only when it is a regular file. A FIFO
// or a device where guard expects a file (a planted /tmp/selfheal.log,
// GUARD_MANIFEST=/dev/zero, a prompt file that is a pipe) would block the
// open or never end the read, so the open is non-blocking and what it
// opened is checked before a byte is read. With nofollow a symlink at the
// last element is refused (ELOOP): guard's own files in shared folders.
// The person's own files (the manifest, a prompt file) may be links.
func OpenRegular(path string, nofollow bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if nofollow {
		flags |= syscall.O_NOFOLLOW
	}
	f, _, err := openRegular(path, flags, 0)
	return f, err
}

// OpenRegularStat is OpenRegular that also returns what fstat said of the
// file, for a caller that needs its size or identity (the model checks on
// every call) without a second fstat.
func OpenRegularStat(path string, nofollow bool) (*os.File, fs.FileInfo, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if nofollow {
		flags |= syscall.O_NOFOLLOW
	}
	return openRegular(path, flags, 0)
}

// openRegular opens path with flags (which hold O_NONBLOCK, so that a FIFO
// cannot hold the open) and keeps the file only when it is a regular one.
func openRegular(path string, flags int, perm os.FileMode) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, flags, perm)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// OpenOwn opens guard's own file at path (a lock, the prompt cache's
// counters), in a folder that is guard's own, for flag (os.O_RDONLY or
// os.O_RDWR), creating it with perm when it is absent. It never follows a
// symlink and never waits on a FIFO. What is at path and is not a regular
// file (a link, a FIFO, a device, a socket) was planted or left by
// something else: since the folder is guard's, it is removed and a fresh
// file created in its place. A folder there is an error: guard removes no
// folder it did not make.
func OpenOwn(path string, flag int, perm os.FileMode) (*os.File, error) {
	flags := flag | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	for try := 0; ; try++ {
		f, _, err := openRegular(path, flags, perm)
		if err == nil || try == 2 || !errors.Is(err, syscall.ELOOP) && !errors.Is(err, ErrNotRegular) && !errors.Is(err, syscall.ENXIO) {
			return f, err
		}
		// unlink, not os.Remove: a folder fails here rather than going.
		if err := syscall.Unlink(path); err != nil && err != syscall.ENOENT {
			return nil, &fs.PathError{Op: "replace", Path: path, Err: err}
		}
	}
}

// ReadRegular reads the regular file at path (see OpenRegular), which must
// hold at most limit bytes: a longer one is an error wrapping ErrTooLarge,
// read not at all when the fstat says so, else no further than one byte
// past the limit. It works on the descriptor directly (one buffer sized by
// fstat, no poller, no read past the size the fstat gave), since shim calls
// read stamps through it.
func ReadRegular(path string, limit int64, nofollow bool) ([]byte, error) {
	flags := syscall.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if nofollow {
		flags |= syscall.O_NOFOLLOW
	}
	fd, err := openFD(path, flags)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	if st.Size > limit {
		return nil, tooLarge(path, limit) // known from the fstat: nothing is read
	}
	// Size 0 may still hold bytes (/proc): read on until end of file.
	buf := make([]byte, 0, min(max(st.Size, 512), limit)+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, tooLarge(path, limit)
		}
		if st.Size > 0 && int64(len(buf)) == st.Size {
			// All the fstat promised: no second read to meet the end (a
			// stamp read on every call costs one read, not two).
			return buf, nil
		}
	}
}

func tooLarge(path string, limit int64) error {
	return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)}
}

func openFD(path string, flags int) (int, error) {
	for {
		fd, err := syscall.Open(path, flags, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// PreadFull reads from fd at off until b is full or the file ends (a
// short count, no error), going on after EINTR: pread(2) may return less
// than asked before the end of a file. Files opened with the raw system
// calls (the decoded manifest, the prompt cache) read with it.
func PreadFull(fd int, b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		k, err := syscall.Pread(fd, b[n:], off+int64(n))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, nil
}
