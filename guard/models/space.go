package models

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/guard/state"
)

// checkSpace refuses a download that cannot fit before it starts, counting
// the bytes a partial file already holds.
func checkSpace(dir, partial string, size int64) error {
	if size <= 0 {
		return nil
	}
	need := size
	if fi, err := os.Lstat(partial); err == nil && fi.Mode().IsRegular() && fi.Size() <= size {
		need -= fi.Size()
	}
	if free := fetch.FreeSpace(dir); free >= 0 && free < need {
		return &fetch.SpaceError{Dir: dir, Need: need, Free: free}
	}
	return nil // enough, or unknown: the download itself will tell
}

// CheckUnknown checks a model the manifest does not know: it must exist,
// be a regular file and start with a GGUF header. A missing file's error
// matches os.ErrNotExist; anything else at path (a FIFO, never waited on)
// is a *NotRegularError; a bad header is a *verify.HeaderError. Only the
// first names the path beyond what os.Open says: the caller's message
// names it.
func CheckUnknown(path string) error {
	f, err := state.OpenRegular(path, false)
	if errors.Is(err, state.ErrNotRegular) {
		return notRegular(path)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 64) // more than the header, for a clearer message
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return verify.Header(b[:n])
}
