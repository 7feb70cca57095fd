package builds

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"

	"github.com/sandbox-guard/guard/guard/state"
)

// Health is what CheckBinary found.
type Health struct {
	OK      bool
	Reason  string   // "missing", "not executable", "missing library libllama.so", ...
	Missing []string // shared libraries (or the interpreter) that do not resolve
}

// slowChecks counts full ELF inspections, so tests can tell a stamp was used.
var slowChecks atomic.Int64

// CheckBinary reports whether path can be executed: it exists, is a regular
// executable file and, for a dynamic ELF, its interpreter and every shared
// library it needs (transitively) resolve the way the loader would find them.
//
// A healthy result is stamped in stampDir (when not empty), keyed by the
// binary's path and holding its inode, mtime and size plus the resolved
// libraries' paths, sizes and mtimes. While the binary is unchanged, the
// next call only stats those paths, which keeps the per-call cost to a few
// syscalls; a library that changed size or mtime (cut short by a killed
// linker) sends it back to the full check, which parses every library.
//
// libraryPath is the LD_LIBRARY_PATH the binary will run with.
func CheckBinary(path, stampDir, libraryPath string) Health {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Health{Reason: "missing"}
		}
		return Health{Reason: fmt.Sprintf("cannot stat: %v", err)}
	}
	if !fi.Mode().IsRegular() {
		return Health{Reason: "not a regular file"}
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return Health{Reason: "not executable"}
	}
	abs := state.Abs(path)
	id := fileID(fi)
	var stamp string
	if stampDir != "" {
		stamp = stampPath(stampDir, abs)
		if stampStillHolds(stamp, abs, id) {
			return Health{OK: true}
		}
	}
	slowChecks.Add(1)
	h, deps := inspect(abs, libraryPath)
	if h.OK && stamp != "" {
		writeStamp(stamp, abs, id, deps)
	}
	return h
}

// inspect does the full check and returns the paths a later stamp check must
// find still present.
func inspect(path, libraryPath string) (Health, []fileStat) {
	f, err := os.Open(path)
	if err != nil {
		// Executable but unreadable (mode 0111): exec will still work and we
		// cannot look inside, so do not call it broken.
		return Health{OK: true}, nil
	}
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	if err != nil || string(magic[:]) != "\x7fELF" {
		// A script or another format the kernel runs: executable is enough.
		return Health{OK: true}, nil
	}
	res, err := resolveELF(path, libraryPath)
	if err != nil {
		// Magic present but unparsable: typically a file cut short.
		return Health{Reason: fmt.Sprintf("corrupt binary: %v", err)}, nil
	}
	if res.missingInterp != "" {
		return Health{Reason: "missing interpreter " + res.missingInterp, Missing: res.missing}, nil
	}
	if len(res.broken) > 0 {
		// Named by path: that is the file to delete (or rebuild).
		return Health{Reason: "broken library " + strings.Join(res.broken, ", "), Missing: res.missing}, nil
	}
	if len(res.missing) > 0 {
		return Health{Reason: missingReason(res.missing), Missing: res.missing}, nil
	}
	return Health{OK: true}, res.found
}

func missingReason(missing []string) string {
	if len(missing) == 1 {
		return "missing library " + missing[0]
	}
	return "missing libraries " + strings.Join(missing, ", ")
}
