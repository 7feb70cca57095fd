package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// check verifies a dist folder as install.sh, restore.sh and the npm
// packages will use it: every file checksums.txt names has that sha256;
// each of arches has its archive, named by ArchiveName and listed there,
// holding exactly ArchiveFiles: this repository's README and a static
// guard for that machine; the one for this machine runs and says the
// version and commit it was stamped with.
func check(dist string, arches []string, out io.Writer) error {
	m, sums, err := readRelease(dist)
	if err != nil {
		return err
	}
	var errs []error
	for name, want := range sums {
		if got, err := fileSHA256(filepath.Join(dist, name)); err != nil || got != want {
			errs = append(errs, fmt.Errorf("%s: sha256 %s (%v), %s says %s", name, got, err, ChecksumsName, want))
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		return err
	}
	for _, arch := range arches {
		name := ArchiveName(m.Version, arch)
		if _, ok := sums[name]; !ok {
			errs = append(errs, fmt.Errorf("no %s in %s (the archive for linux/%s)", name, ChecksumsName, arch))
			continue
		}
		files, err := readArchive(filepath.Join(dist, name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if got := sortedNames(files); !slices.Equal(got, ArchiveFiles) {
			errs = append(errs, fmt.Errorf("%s holds %v, want %v", name, got, ArchiveFiles))
			continue
		}
		if !bytes.Equal(files["README.md"].data, readme) {
			errs = append(errs, fmt.Errorf("%s: README.md is not this repository's", name))
		}
		g := files["guard"]
		if g.mode&0o111 == 0 {
			errs = append(errs, fmt.Errorf("%s: guard is not executable (mode %v)", name, g.mode))
		}
		if err := checkStatic(g.data, arch); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if arch == runtime.GOARCH {
			v, err := runVersion(g.data)
			want := fmt.Sprintf("guard version %s (commit %s, go", m.Version, short(m.Commit))
			if err != nil || !strings.HasPrefix(v, want) {
				errs = append(errs, fmt.Errorf("%s: guard --version printed %q (%v), want %s…", name, v, err, want))
			} else {
				fmt.Fprintf(out, "release: %s runs: %s\n", name, strings.TrimSpace(v))
			}
		}
		fmt.Fprintf(out, "release: %s: %v, a static linux/%s guard, sha256 %s\n", name, ArchiveFiles, arch, sums[name])
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "release: %s is a good release of guard %s\n", dist, m.Version)
	return nil
}

// short is a commit as guard --version prints it.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkStatic: an ELF for arch with no interpreter and no shared library,
// so it runs on any Linux of that machine.
func checkStatic(data []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("guard is not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Machine != elfMachine[arch] {
		return fmt.Errorf("guard is built for %v, not %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("guard has an ELF interpreter (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("guard needs shared libraries %v: not static", libs)
	}
	return nil
}

// runVersion runs a guard executable's --version in a HOME of its own.
func runVersion(exe []byte) (string, error) {
	dir, err := os.MkdirTemp("", "release-check-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "guard")
	if err := os.WriteFile(p, exe, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command(p, "--version")
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "GUARD_STATE_DIR=" + dir, "GUARD_LOG=" + filepath.Join(dir, "log")}
	out, err := cmd.Output()
	return string(out), err
}

type archived struct {
	mode os.FileMode
	data []byte
}

// maxArchive bounds what is read of one archive: a static guard is a few
// tens of MiB.
const maxArchive = 512 << 20

// readArchive reads a .tar.gz: its regular files by name. Anything else
// in it (a link, a folder, a path with a slash) is an error: a release
// archive is flat.
func readArchive(path string) (map[string]archived, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(io.LimitReader(zr, maxArchive))
	files := map[string]archived{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "/") {
			return nil, fmt.Errorf("%s: %q is not a file at the top of the archive", path, h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		files[h.Name] = archived{mode: h.FileInfo().Mode(), data: data}
	}
}

func sortedNames(files map[string]archived) []string {
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
