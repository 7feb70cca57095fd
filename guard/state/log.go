package state

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenLog opens path for appending, the way guard keeps every log of its
// own (the heal log, build logs): the last element is never followed as a
// symlink, a new file is created 0600, and a regular file grown past
// maxBytes (0: no cap) is first rotated to path+".1", replacing the older
// rotation, so a log never fills the disk; a rotation that fails (another
// user's path+".1" in a sticky /tmp) is an error, not a log that grows on.
// The open is non-blocking and anything but a regular file is refused
// (ErrNotRegular): a FIFO planted at the log's path must neither hold the
// call nor swallow its events. A file of another user (a planted
// /tmp/selfheal.log) is refused (ErrNotOwned) and never rotated. The error
// names the file.
func OpenLog(path string, maxBytes int64) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && maxBytes > 0 && fi.Mode().IsRegular() && fi.Size() > maxBytes && Owned(fi) {
		if err := os.Rename(path, path+".1"); err != nil {
			return nil, fmt.Errorf("rotate %s past %d bytes: %w", path, maxBytes, err)
		}
	}
	f, fi, err := openRegular(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err == nil && !Owned(fi) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrNotOwned}
	}
	return f, err
}

// Owned reports whether fi belongs to the user guard runs as.
func Owned(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Geteuid()
}
