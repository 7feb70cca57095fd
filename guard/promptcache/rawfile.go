package promptcache

import (
	"io"
	"io/fs"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// The hit path opens two small regular files. os.File would register each
// with the runtime poller (several extra syscalls) for reads that never
// block, so these helpers use raw descriptors instead.

// fileID is what os.SameFile compares, kept from the descriptor we read.
type fileID struct{ dev, ino uint64 }

// readEntryFile reads a whole regular file of at most limit bytes without
// following a symlink or waiting on a FIFO. A file that is too big, or not
// regular, returns errCorrupt with its id so the caller can remove it.
func readEntryFile(path string, limit int64) ([]byte, *fileID, error) {
	fd, err := openRaw(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK)
	if err != nil {
		return nil, nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	id := &fileID{dev: uint64(st.Dev), ino: st.Ino}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Size > limit {
		return nil, id, errCorrupt
	}
	b := make([]byte, st.Size)
	if n, err := state.PreadFull(fd, b, 0); err != nil || n != len(b) {
		return nil, id, errCorrupt
	}
	return b, id, nil
}

func openRaw(path string, mode int) (int, error) {
	for {
		fd, err := syscall.Open(path, mode|syscall.O_CLOEXEC, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// pwriteFull writes b at offset 0.
func pwriteFull(fd int, b []byte) error {
	for off := 0; off < len(b); {
		n, err := syscall.Pwrite(fd, b[off:], int64(off))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += n
	}
	return nil
}
