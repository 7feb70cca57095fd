package install

import (
	"fmt"

	"github.com/sandbox-guard/guard/guard/extent"
	"github.com/sandbox-guard/guard/guard/state"
)

// CopyProblem says what is wrong with guard's copy at path, or "" when it
// is a whole executable. A sandbox that truncates large files can leave
// the copy empty, and a shell runs an empty executable as an empty script:
// every shim would then exit 0 having run nothing. A copy cut short
// elsewhere crashes where it is cut. Both are found from the ELF headers
// alone (a few hundred bytes): every segment and section they list must
// lie within the file.
func CopyProblem(path string) string {
	f, fi, err := state.OpenRegularStat(path, false)
	if err != nil {
		return "" // missing, or not a file: the caller's cases, not a broken copy
	}
	defer f.Close()
	switch {
	case fi.Size() == 0:
		return "empty (0 bytes)"
	case fi.Mode().Perm()&0o111 == 0:
		return "not executable"
	}
	need, ok := extent.ELF(f)
	if !ok {
		return "not an ELF executable"
	}
	if fi.Size() < need {
		return fmt.Sprintf("cut off (%d of %d bytes)", fi.Size(), need)
	}
	return ""
}
