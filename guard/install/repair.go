package install

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/state"
)

// Unchanged reports whether the shim folder is as the last full Repair
// left it, whole: the same manifest generation (gen, "" for none: never
// unchanged), and the folder and guard's copy in it with the same inode,
// size and change times. It is what a call costs on a healthy folder, two
// stats and a small read however many tools there are: removing or adding
// a link changes the folder's times, and a copy cut short changes its own.
func Unchanged(shimDir, stateDir, gen string) bool {
	now, ok := shimsState(shimDir, gen)
	if !ok {
		return false
	}
	stamp, err := state.ReadRegular(state.Layout{Dir: stateDir}.ShimsStamp(), 4096, true)
	return err == nil && string(stamp) == now
}

// shimsState is the line the stamp holds; false when it cannot be made.
func shimsState(shimDir, gen string) (string, bool) {
	var d, c syscall.Stat_t
	if gen == "" || syscall.Stat(shimDir, &d) != nil || syscall.Stat(filepath.Join(shimDir, GuardName), &c) != nil {
		return "", false
	}
	return fmt.Sprintf("v1 %s %q dir %d:%d:%d.%d:%d.%d copy %d:%d:%d:%d.%d:%d.%d\n", gen, shimDir,
		d.Dev, d.Ino, d.Mtim.Sec, d.Mtim.Nsec, d.Ctim.Sec, d.Ctim.Nsec,
		c.Dev, c.Ino, c.Size, c.Mtim.Sec, c.Mtim.Nsec, c.Ctim.Sec, c.Ctim.Nsec), true
}

// stamp records now (a shimsState taken before the check that found the
// folder whole: whatever changed after it shows), best effort.
func stamp(stateDir, now string) {
	file := state.Layout{Dir: stateDir}.ShimsStamp()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err == nil {
		_ = state.Replace(file, []byte(now), 0o600)
	}
}

// Repair is the full check of the shim folder: one lstat per tool name
// (each must be a hard link to guard's copy: docs/shells.md, "OpenClaw"),
// a read of guard's copy's ELF header (an empty or cut-off copy is as good
// as gone), and only when something is gone or outdated, the fix: a new
// copy, and every name linked to it again, an old guard's links and the
// symlinks of an install made before each name had its own path included.
// A file or link that is not guard's stays. It returns the names it
// re-created. A folder it found whole is stamped for Unchanged (gen is
// the manifest's generation). It does nothing when guard was never
// installed here (no shim folder and no install marker), so running a
// guard binary from a build folder does not create a shim folder behind
// the user's back.
func Repair(shimDir, stateDir, self string, tools []string, gen string) ([]string, error) {
	if _, err := os.Stat(shimDir); errors.Is(err, fs.ErrNotExist) {
		// The marker names the folder install put guard in: a call that
		// was told another folder must not build a second one.
		if installed := Recorded(stateDir).ShimDir; installed != shimDir {
			return nil, nil
		}
	}
	mtime, timed := linksCheckStart(shimDir)
	now, ok := shimsState(shimDir, gen)
	if whole(shimDir, tools) {
		if ok {
			stamp(stateDir, now)
		}
		if timed {
			stampLinks(shimDir, mtime)
		}
		return nil, nil
	}
	// Twenty agent calls after an eviction would each mend the folder (and
	// log it) without the lock; with it the first mends and the others find
	// nothing left to do. A state folder that cannot hold the lock must not
	// stop the repair.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if held, err := lock.Acquire(ctx, state.Layout{Dir: stateDir}.Lock("shims"), nil); err == nil {
		defer held.Release()
	}
	if err := os.MkdirAll(shimDir, 0o755); err != nil {
		return nil, err
	}
	var done []string
	g := statCopy(shimDir)
	recreated := !copyWhole(g)
	if recreated {
		exe, err := os.ReadFile(self)
		if err != nil {
			return done, fmt.Errorf("read guard executable: %w", err)
		}
		if err := copyGuard(exe, g.path); err != nil {
			return done, err
		}
		done = append(done, GuardName)
		g = statCopy(shimDir).replacing(g)
	}
	exe := copyBytes(shimDir)
	for _, name := range tools {
		switch k := g.classify(shimDir, name); {
		case k == Linked && recreated && !g.holds(shimDir, name):
			// The old copy's bytes under another inode: the names were
			// hard links to the copy that went, and are again.
		case k != Missing && k != Outdated:
			continue // guard's already, or a file guard did not put there
		}
		if err := linkTool(shimDir, name, exe); err != nil {
			return done, err
		}
		done = append(done, name)
	}
	mtime, timed = linksCheckStart(shimDir)
	if now, ok := shimsState(shimDir, gen); whole(shimDir, tools) {
		if ok {
			stamp(stateDir, now)
		}
		if timed {
			stampLinks(shimDir, mtime)
		}
	}
	return done, nil
}

// copyWhole reports whether guard's copy is there and whole.
func copyWhole(g guardFile) bool { return g.ok && CopyProblem(g.path) == "" }

// whole reports whether the shim folder needs nothing: guard's copy whole,
// and each tool name linked to it or a file guard leaves alone.
func whole(shimDir string, tools []string) bool {
	g := statCopy(shimDir)
	if !copyWhole(g) {
		return false
	}
	for _, name := range tools {
		if k := g.classify(shimDir, name); k == Missing || k == Outdated {
			return false
		}
	}
	return true
}

// LinksStamp is the empty file in the shim folder whose mtime is the
// folder's as the last full check of the links found it whole. The PATH
// block tests `[ FOLDER -nt STAMP ]` (a shell builtin, no program
// started): a link removed or added since makes the folder newer, and only
// then does a shell start run guard to mend it.
const LinksStamp = ".links.stamp"

// linksCheckStart is taken before a check of the links: it makes
// LinksStamp when it is missing (a regular file of guard's, never a link
// followed; first, since creating it changes the folder's times), and
// returns the folder's mtime, false when the folder cannot be read.
func linksCheckStart(shimDir string) (syscall.Timespec, bool) {
	if f, err := state.OpenOwn(filepath.Join(shimDir, LinksStamp), os.O_WRONLY, 0o644); err == nil {
		_ = f.Close()
	}
	var folder syscall.Stat_t
	if syscall.Stat(shimDir, &folder) != nil {
		return syscall.Timespec{}, false
	}
	return folder.Mtim, true
}

// stampLinks gives LinksStamp the folder's mtime taken before the check
// that found it whole, best effort: whatever changed after shows as a
// newer folder.
func stampLinks(shimDir string, mtime syscall.Timespec) {
	ts := unix.NsecToTimespec(syscall.TimespecToNsec(mtime))
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(shimDir, LinksStamp), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}
