package state

import (
	"os"
	"syscall"
)

// OpenLog opens path for appending, the way guard keeps every log of its
// own (the heal log, build logs): the last element is never followed as a
// symlink, a new file is created 0600, and a regular file grown past
// maxBytes (0: no cap) is first rotated to path+".1", replacing the older
// rotation, so a log never fills the disk. Only a file of guard's own user
// is rotated: another user's file (a planted /tmp/selfheal.log) is left for
// the caller to refuse. The open is non-blocking and anything but a regular
// file is refused (ErrNotRegular): a FIFO planted at the log's path must
// neither hold the call nor swallow its events. The error names the file.
func OpenLog(path string, maxBytes int64) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && maxBytes > 0 && fi.Mode().IsRegular() && fi.Size() > maxBytes && Owned(fi) {
		_ = os.Rename(path, path+".1")
	}
	f, _, err := openRegular(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	return f, err
}

// Owned reports whether fi belongs to the user guard runs as.
func Owned(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Geteuid()
}
