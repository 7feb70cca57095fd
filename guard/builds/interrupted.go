package builds

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-guard/guard/guard/extent"
	"github.com/sandbox-guard/guard/manifest"
)

// An interrupted build is one whose steps did not end on their own: guard
// died with them (a sandbox stopped, a SIGKILL), guard stopped them (its
// limit, Ctrl-C, SIGTERM) and a process of the step's group had to be
// SIGKILLed after the grace, or someone else killed a step by a signal. make trusts any output newer than its inputs,
// so a compiler or linker killed mid write leaves a truncated object or
// library that every later make run keeps, and each call then fails until
// someone deletes the build folder. So a marker is written before the
// steps and removed once they have ended: on their own, or within the
// grace after SIGTERM, which make and ninja use to delete the target they
// were writing (a clean stop, see run). A rebuild that finds the marker
// first removes, in the recipe's output folders only, the products the
// interrupted run provably cut short (cutShort), and make rebuilds those;
// everything whole is kept, so no finished compile is done twice.

// markerPath is the interrupted-build marker of the recipe named name.
func (b *Builder) markerPath(name string) string {
	return filepath.Join(b.layout().Builds(), safeName(name)+".running")
}

// writeMarker (re)creates the marker. Removing it first gives it a fresh
// mtime: it dates this run, and a later scrub keys on it.
func writeMarker(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the build folder: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the old build marker: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write the build marker: %w", err)
	}
	fmt.Fprintf(f, "pid %d started %s\n", os.Getpid(), time.Now().Format(time.RFC3339Nano))
	return f.Close()
}

// scrubOutputs removes what an interrupted run cut short: in each of the
// recipe's output folders (never elsewhere under dir: a .venv, sources and
// notes there are not the build's), the files modified at or after since
// that cutShort proves were cut short. An output folder that is missing
// has nothing to scrub; one reached through a symlink, or that is not
// below dir, is left alone and said so in the log, as is every removal. No outputs (a
// recipe's outputs = []) means nothing is scrubbed: manifest.Parse has
// already given a recipe without the key its default folder.
func scrubOutputs(dir string, outputs []string, since time.Time, logf io.Writer) (removed []string, err error) {
	if len(outputs) == 0 {
		return nil, nil
	}
	top, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		fmt.Fprintf(logf, "== guard: not scrubbing the outputs: %v\n", err)
		return nil, nil
	}
	defer top.Close()
	var errs []error
	for _, out := range outputs {
		root, why := outputRoot(top, out)
		if why != "" {
			fmt.Fprintf(logf, "== guard: not scrubbing output %q: %s\n", out, why)
			continue
		}
		if root == nil {
			continue
		}
		got, err := scrubRoot(root, filepath.Join(dir, filepath.Clean(out)), since)
		root.Close()
		for _, r := range got {
			fmt.Fprintf(logf, "== guard: removed %s (cut short by the interrupted build: %s)\n", r.path, r.why)
			removed = append(removed, r.path)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// outputRoot opens the output folder out of the recipe's folder top,
// checked one component at a time so that no symlink leads the scrub out
// of top, and then checked to be the folder that was checked (nothing was
// swapped in meanwhile). It returns nil when the folder does not exist, and
// why it must not be scrubbed when it is not a real folder below top.
func outputRoot(top *os.Root, out string) (root *os.Root, why string) {
	if !manifest.IsOutputFolder(out) {
		return nil, "not a folder below the recipe's dir"
	}
	var (
		name string
		fi   fs.FileInfo
		err  error
	)
	for _, part := range strings.Split(filepath.Clean(out), "/") {
		name = filepath.Join(name, part)
		fi, err = top.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, ""
		case err != nil:
			return nil, err.Error()
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, filepath.Join(top.Name(), name) + " is a symlink (the scrub never follows one)"
		case !fi.IsDir():
			return nil, filepath.Join(top.Name(), name) + " is not a folder"
		}
	}
	root, err = top.OpenRoot(name)
	if err != nil {
		return nil, err.Error()
	}
	if now, err := root.Stat("."); err != nil || !os.SameFile(fi, now) {
		root.Close()
		return nil, filepath.Join(top.Name(), name) + " changed while it was checked"
	}
	return root, ""
}

// A removal is one file the scrub removed, named below the output folder's
// path, and why (cutShort).
type removal struct{ path, why string }

// scrubRoot removes, below root, the regular files modified at or after
// since that cutShort proves were cut short, and returns them, named below
// dir, root's path. It never follows a symlink and never enters .git. Every look and removal goes through root, so a folder
// swapped for a symlink during the walk cannot lead it out of root. Files
// it cannot read or remove are left for make to trip over, with the error.
func scrubRoot(root *os.Root, dir string, since time.Time) (removed []removal, err error) {
	if filepath.Base(dir) == ".git" {
		return nil, nil
	}
	var errs []error
	walkErr := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == "." {
				return err
			}
			return nil // an unreadable corner is not a reason to stop
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks (never followed), sockets, fifos
		}
		fi, err := root.Lstat(name)
		if err != nil || !fi.Mode().IsRegular() || fi.ModTime().Before(since) {
			return nil
		}
		why := cutShort(root, name, fi)
		if why == "" {
			return nil
		}
		path := filepath.Join(dir, name)
		if beforeScrubRemove != nil {
			beforeScrubRemove(path)
		}
		if err := root.Remove(name); err != nil {
			if pe, ok := err.(*fs.PathError); ok {
				pe.Path = path
			}
			errs = append(errs, err)
			return nil
		}
		removed = append(removed, removal{path, why})
		return nil
	})
	if walkErr != nil {
		errs = append(errs, walkErr)
	}
	return removed, errors.Join(errs...)
}

// beforeScrubRemove, when set (by tests), runs just before the scrub
// removes path.
var beforeScrubRemove func(path string)

// cutShort says why the file rel below root, written since the interrupted
// run began, is an output that run provably cut short, or "" to keep it:
// an ELF file shorter than its own headers say (extent.ELF), an ar
// archive whose members run past its end (extent.Archive), an empty file
// named as a compiler or linker names what it writes (isProductName), or a
// file so named whose header was never written (GNU as and ld write the
// ELF header last, at close, so one killed before leaves zeros there).
// A whole object, library or executable is kept, and so is anything else:
// CMake's configure-time programs (CMakeFiles/*/CompilerIdC/a.out) are
// whole ELF files, its caches and scripts are neither ELF nor ar. The file
// is opened without waiting on a FIFO and judged only when it is still the
// regular file that was walked (fi).
func cutShort(root *os.Root, rel string, fi fs.FileInfo) string {
	product := isProductName(fi.Name())
	if fi.Size() == 0 {
		if product {
			return "empty"
		}
		return ""
	}
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	now, err := f.Stat()
	if err != nil || !now.Mode().IsRegular() || !os.SameFile(fi, now) {
		return ""
	}
	size := now.Size()
	if end, ok := extent.ELF(f); ok {
		if end > size {
			return fmt.Sprintf("an ELF file cut off at %d of its %d bytes", size, end)
		}
		return ""
	}
	if end, cut := extent.Archive(f, size); cut {
		return fmt.Sprintf("an ar archive cut off at %d of at least %d bytes", size, end)
	}
	var head [4]byte
	if product && size >= int64(len(head)) {
		if _, err := f.ReadAt(head[:], 0); err == nil && head == [4]byte{} {
			return "its header was never written"
		}
	}
	return ""
}

// productSuffixes are the names compilers and linkers write.
var productSuffixes = []string{".o", ".obj", ".a", ".so"}

// isProductName tells the name of a compile or link step's output: one
// ending .o .obj .a .so or .so.N, or one without an extension (an
// executable, such as bin/llama-completion). Dot files (.gitkeep) and
// names with any other extension (a header, a CMake script, a .d file)
// are not.
func isProductName(name string) bool {
	for _, s := range productSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return isVersionedSO(name) || filepath.Ext(name) == ""
}

// isVersionedSO matches libx.so.1 and libx.so.1.2.3.
func isVersionedSO(name string) bool {
	i := strings.LastIndex(name, ".so.")
	if i < 0 {
		return false
	}
	for _, part := range strings.Split(name[i+len(".so."):], ".") {
		if part == "" || strings.Trim(part, "0123456789") != "" {
			return false
		}
	}
	return true
}
