package builds

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// stampHeader starts every binary stamp; bump the number when the format or
// the meaning of a check changes, so old stamps are ignored. 3: every file
// is known by its state.Identity (ctime, device and inode included), the
// same notion of an unchanged file as a model's stamp.
const stampHeader = "guard-binary-stamp 3"

// maxStamp bounds a stamp's size; a binary with more dependencies than fit
// is simply not stamped and gets the full check each time.
const maxStamp = 8192

// fileID is what must stay the same for a stamp to hold: the binary's
// identity and its permissions (a chmod -x is a change the stamp must see).
func fileID(fi os.FileInfo) string {
	return state.IdentityOf(fi).String() + " " + strconv.FormatUint(uint64(fi.Mode().Perm()), 8)
}

// stampPath names a binary's stamp after its path; "bin-" keeps it apart
// from the model stamps in the same folder.
func stampPath(dir, binary string) string {
	return filepath.Join(dir, "bin-"+state.PathKey(binary))
}

// fileStat is what the stamp keeps of each library: a library cut short or
// rewritten in place by a killed linker (or copied over with cp -p) keeps
// its path but not its identity, and a stat is all the fast path can
// afford to look at.
type fileStat struct {
	path string
	id   state.Identity
}

func statOf(path string, fi os.FileInfo) fileStat {
	return fileStat{path: path, id: state.IdentityOf(fi)}
}

// line is the stamp's line for the file: its identity (five numbers), then
// the path, which may hold spaces.
func (f fileStat) line() string {
	return f.id.String() + " " + f.path
}

// identityFields is how many space-separated numbers start a line.
const identityFields = 5

// stampStillHolds reads the stamp and stats every file it lists. Any
// mismatch (gone, another identity) sends the caller to the full check,
// which rewrites the stamp.
func stampStillHolds(stamp, binary, id string) bool {
	data, ok := readSmall(stamp)
	if !ok {
		return false
	}
	lines := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
	if len(lines) < 2 || lines[0] != stampHeader+" "+id || lines[1] != binary {
		return false
	}
	var st syscall.Stat_t
	for _, dep := range lines[2:] {
		fields := strings.SplitN(dep, " ", identityFields+1)
		if len(fields) != identityFields+1 {
			return false
		}
		path := fields[identityFields]
		if syscall.Stat(path, &st) != nil || state.IdentityOfStat(&st).String()+" "+path != dep {
			return false
		}
	}
	return true
}

// readSmall reads a stamp: one open that neither follows a link nor waits
// on a FIFO planted in the stamp's place, one fstat that refuses what is not
// a regular file or is too large, one read (state.ReadRegular). Empty is no
// stamp.
func readSmall(path string) (string, bool) {
	data, err := state.ReadRegular(path, maxStamp-1, true)
	if err != nil || len(data) == 0 {
		return "", false
	}
	return string(data), true
}

// writeStamp records a healthy check. Failures are ignored: a missing stamp
// only costs the next call a full check.
func writeStamp(stamp, binary, id string, deps []fileStat) {
	var b strings.Builder
	b.WriteString(stampHeader + " " + id + "\n" + binary + "\n")
	if strings.Contains(binary, "\n") {
		return // cannot be written one a line; never stamp it
	}
	for _, d := range deps {
		if strings.Contains(d.path, "\n") {
			return
		}
		b.WriteString(d.line() + "\n")
	}
	if b.Len() >= maxStamp {
		return
	}
	if err := os.MkdirAll(filepath.Dir(stamp), 0o700); err != nil {
		return
	}
	_ = state.Replace(stamp, []byte(b.String()), 0o600)
}
