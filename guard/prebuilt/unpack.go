package prebuilt

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Limits of an archive unpacked: a release of llama.cpp is about 30 MB
// packed, 80 MB and some hundred files unpacked.
const (
	maxUnpackedBytes = 4 << 30
	maxEntries       = 20000
)

// unpack writes the .tar.gz at archive into dest, a folder it creates
// (it must not exist). Only regular files, folders and links that stay
// inside dest are written: an absolute path, a "..", a link out of dest
// or through a link the archive made, a device or a FIFO refuses the
// whole archive. Files are created with O_EXCL|O_NOFOLLOW, so nothing
// planted is written through.
func unpack(archive, dest string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s is not a .tar.gz: %w", filepath.Base(archive), err)
	}
	if err := os.Mkdir(dest, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	links := map[string]bool{} // the archive's links: nothing is written below one
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", filepath.Base(archive), err)
		}
		if n >= maxEntries {
			return fmt.Errorf("%s has more than %d entries", filepath.Base(archive), maxEntries)
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "" {
			continue // "./"
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if links[p] {
				return fmt.Errorf("refused %q: below the link %q the archive made", h.Name, p)
			}
		}
		full := filepath.Join(dest, filepath.FromSlash(name))
		if h.Typeflag != tar.TypeDir {
			if err := mkdirs(dest, path.Dir(name)); err != nil {
				return err
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdirs(dest, name); err != nil {
				return err
			}
		case tar.TypeReg:
			if total += h.Size; total > maxUnpackedBytes {
				return fmt.Errorf("%s unpacks to more than 4 GiB", filepath.Base(archive))
			}
			if err := writeFile(full, tr, h.Size, fs.FileMode(h.Mode)&0o755|0o600); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := linkInside(name, h.Linkname); err != nil {
				return err
			}
			links[name] = true
			if err := os.Symlink(h.Linkname, full); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := entryName(h.Linkname)
			if err != nil || target == "" || links[target] {
				return fmt.Errorf("refused the hard link %q to %q", h.Name, h.Linkname)
			}
			src := filepath.Join(dest, filepath.FromSlash(target))
			if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() {
				return fmt.Errorf("refused the hard link %q: %q is not a file the archive made before it", h.Name, h.Linkname)
			}
			if err := os.Link(src, full); err != nil {
				return err
			}
		default:
			return fmt.Errorf("refused %q: not a file, folder or link (type %q)", h.Name, h.Typeflag)
		}
	}
}

// entryName is an archive path made relative and clean, or an error for
// one that leaves the folder it unpacks into.
func entryName(raw string) (string, error) {
	if raw == "" || strings.HasPrefix(raw, "/") || strings.ContainsRune(raw, 0) {
		return "", fmt.Errorf("refused the path %q: not relative", raw)
	}
	name := path.Clean(raw)
	if name == ".." || strings.HasPrefix(name, "../") {
		return "", fmt.Errorf("refused the path %q: it leaves the folder", raw)
	}
	if name == "." {
		return "", nil
	}
	return name, nil
}

// linkInside refuses a link at name whose target is absolute or climbs
// out of the folder.
func linkInside(name, target string) error {
	if target == "" || strings.HasPrefix(target, "/") {
		return fmt.Errorf("refused the link %q to %q: not relative", name, target)
	}
	to := path.Clean(path.Join(path.Dir(name), target))
	if to == ".." || strings.HasPrefix(to, "../") {
		return fmt.Errorf("refused the link %q to %q: it leaves the folder", name, target)
	}
	return nil
}

// mkdirs makes rel's folders below dest, one at a time, each a real
// folder (never a link).
func mkdirs(dest, rel string) error {
	if rel == "." {
		return nil
	}
	p := dest
	for _, part := range strings.Split(rel, "/") {
		p = filepath.Join(p, part)
		err := os.Mkdir(p, 0o755)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("refused %s: not a folder", p)
		}
	}
	return nil
}

// writeFile creates p (never through a link, never over a file) with
// exactly size bytes from r.
func writeFile(p string, r io.Reader, size int64, mode fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s: the archive ends after %d of %d bytes", filepath.Base(p), n, size)
	}
	return err
}
