package verify

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandbox-guard/guard/guard/state"
)

// stamp records the sha256 of a file together with the identity the file
// had when it was hashed (state.Identity: ctime included).
type stamp struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	state.Identity
	DeclaredBy string `json:"declared_by,omitempty"` // see Record
}

// Record is what guard remembers of a file it hashed at a path. A stamp is
// a small file in guard's state folder, so the record outlives the
// eviction of the model: status tells "evicted" (a record, no file) from
// "never fetched" (no record).
type Record struct {
	SHA256 string
	// DeclaredBy says who declared the sha256 the file was checked
	// against: "manifest" (a pin), a url (its X-Linked-Etag), or "" when
	// the file was hashed but checked against nothing.
	DeclaredBy string
}

// Recorded returns the record of path, whether or not the file is still
// there.
func Recorded(stampDir, path string) (Record, bool) {
	s, ok := readStamp(stampDir, path)
	return Record{SHA256: s.SHA256, DeclaredBy: s.DeclaredBy}, ok
}

// stampPath names the stamp of path after its absolute path (state.PathKey),
// which the stamp also records.
func stampPath(stampDir, path string) (abs, stampFile string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = filepath.Clean(path)
	}
	return abs, filepath.Join(stampDir, state.PathKey(abs)+".stamp")
}

// maxStamp bounds what is read of a stamp: a path and a few numbers.
const maxStamp = 64 << 10

// readStamp returns the stamp for path, or ok false when there is none or
// it cannot be read (which only costs a rehash).
func readStamp(stampDir, path string) (stamp, bool) {
	abs, name := stampPath(stampDir, path)
	// A stamp is guard's own file: a link or FIFO planted in its place is
	// no stamp (and the next hash replaces it), never followed or waited on.
	b, err := state.ReadRegular(name, maxStamp, true)
	if err != nil {
		return stamp{}, false
	}
	var s stamp
	if json.Unmarshal(b, &s) != nil || s.Path != abs {
		return stamp{}, false
	}
	return s, true
}

// WriteStamp records sum as the sha256 of path as the file is now (size,
// mtime, ctime, device, inode), and declaredBy as who declared the sum the
// file was checked against (see Record). The caller must know that sum is
// the sum of the file as it is: Full after hashing, a download after its
// rename. The write is atomic (state.Replace): a reader sees the old stamp
// or the new.
func WriteStamp(stampDir, path, sum, declaredBy string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("write stamp: %w", err)
	}
	return writeStamp(stampDir, path, sum, declaredBy, state.IdentityOf(fi))
}

func writeStamp(stampDir, path, sum, declaredBy string, id state.Identity) error {
	abs, name := stampPath(stampDir, path)
	b, err := json.Marshal(stamp{Path: abs, SHA256: normalSum(sum), Identity: id, DeclaredBy: declaredBy})
	if err != nil {
		return fmt.Errorf("write stamp: %w", err)
	}
	if err := os.MkdirAll(stampDir, 0o700); err != nil {
		return fmt.Errorf("write stamp: %w", err)
	}
	if err := state.Replace(name, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write stamp: %w", err)
	}
	return nil
}
