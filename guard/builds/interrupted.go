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

	"github.com/sandbox-guard/guard/manifest"
)

// An interrupted build is one whose steps did not run to their end: guard
// (and usually the steps' process group with it) was SIGKILLed, or the heal
// timeout stopped them. make trusts any output newer than its inputs, so a
// linker killed mid write leaves a truncated library, or an executable
// without its x bit, that every later make run keeps, and each call then
// fails until someone deletes the build folder. So a marker is written
// before the steps and removed once they have ended on their own; a rebuild
// that finds it first removes, in the recipe's output folders only, the
// build products the interrupted run may have left half written, and make
// rebuilds them.

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

// scrubOutputs removes what an interrupted run may have left half written:
// in each of the recipe's output folders (never elsewhere under dir: a
// .venv, sources and notes there are not the build's), the build products
// modified at or after since. An output folder that is missing has nothing
// to scrub; one reached through a symlink, or that is not below dir, is
// left alone and said so in the log, as is every removal. No outputs (a
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
		for _, p := range got {
			fmt.Fprintf(logf, "== guard: removed %s (a partial output of the interrupted build)\n", p)
		}
		removed = append(removed, got...)
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

// scrubRoot removes, below root, the regular files modified at or after
// since that a build step writes (see isBuildProduct) and returns their
// paths, named below dir, root's path. It never follows a symlink, never
// enters .git, and leaves sources alone: a source file newer than since is
// not a product. Every look and removal goes through root, so a folder
// swapped for a symlink during the walk cannot lead it out of root. Files
// it cannot read or remove are left for make to trip over, with the error.
func scrubRoot(root *os.Root, dir string, since time.Time) (removed []string, err error) {
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
		if !isBuildProduct(root, name, fi) {
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
		removed = append(removed, path)
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

// productSuffixes are the names compilers and linkers write.
var productSuffixes = []string{".o", ".obj", ".a", ".so"}

// sourceSuffixes keep an empty file that is a source (an empty header, a
// placeholder) from being taken for an output cut short.
var sourceSuffixes = []string{
	".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".m", ".mm", ".metal",
	".py", ".sh", ".txt", ".cmake", ".in", ".md", ".json", ".toml", ".yaml", ".yml", ".go", ".rs",
}

// isBuildProduct tells an output of a compile or link step: a name ending
// .o .obj .a .so .so.N, or contents that are an ELF file or an ar archive,
// or an empty file (an output cut off before its first byte) unless its
// name is a source's. rel is the file's name below root.
func isBuildProduct(root *os.Root, rel string, fi fs.FileInfo) bool {
	name := fi.Name()
	for _, s := range productSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	if isVersionedSO(name) {
		return true
	}
	if fi.Size() == 0 {
		if strings.HasPrefix(name, ".") {
			return false // .gitkeep and the like
		}
		for _, s := range sourceSuffixes {
			if strings.HasSuffix(name, s) {
				return false
			}
		}
		return true
	}
	magic, ok := readMagic(root, rel)
	return ok && (strings.HasPrefix(magic, "\x7fELF") || strings.HasPrefix(magic, "!<arch>"))
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

// readMagic reads the first 8 bytes of the file name in root, without
// waiting on a FIFO swapped in.
func readMagic(root *os.Root, name string) (string, bool) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", false
	}
	defer f.Close()
	var buf [8]byte
	n, err := io.ReadFull(f, buf[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", false
	}
	return string(buf[:n]), true
}
