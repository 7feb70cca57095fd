package resolve_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-guard/guard/guard/resolve"
)

func write(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
		t.Fatal(err)
	}
}

func TestReal(t *testing.T) {
	root := t.TempDir()
	shim := filepath.Join(root, "shim")
	guardBin := filepath.Join(shim, "guard")
	write(t, guardBin, 0o755)
	os.Symlink(guardBin, filepath.Join(shim, "npx"))
	self, _ := resolve.IDOf(guardBin)

	other := filepath.Join(root, "other") // a second folder holding guard under the tool name
	os.MkdirAll(other, 0o755)
	os.Symlink(guardBin, filepath.Join(other, "npx"))
	hard := filepath.Join(root, "hard")
	os.MkdirAll(hard, 0o755)
	os.Link(guardBin, filepath.Join(hard, "npx"))

	real := filepath.Join(root, "usr", "bin", "npx")
	write(t, real, 0o755)
	noexec := filepath.Join(root, "noexec", "npx")
	write(t, noexec, 0o644)
	shimLink := filepath.Join(root, "shimlink") // the shim folder under another name
	os.Symlink(shim, shimLink)

	path := strings.Join([]string{shimLink, shim + "/", other, hard, filepath.Dir(noexec), filepath.Dir(real)}, ":")
	q := resolve.Query{Name: "npx", PathEnv: path, ShimDir: shim, Self: self, HaveSelf: true}
	got, err := resolve.Real(q)
	if err != nil || got != real {
		t.Fatalf("Real = %q, %v; want %q", got, err, real)
	}

	q.PathEnv = strings.Join([]string{shim, other, hard}, ":")
	_, err = resolve.Real(q)
	var nf *resolve.NotFoundError
	if !errors.As(err, &nf) || len(nf.Tried) != 2 || !strings.Contains(err.Error(), other) {
		t.Fatalf("loop-only PATH: %v", err)
	}

	q = resolve.Query{Name: "npx", Path: real, ShimDir: shim}
	if got, err := resolve.Real(q); err != nil || got != real {
		t.Fatalf("manifest path: %q %v", got, err)
	}
	q.Path = filepath.Join(root, "gone")
	if _, err := resolve.Real(q); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("missing manifest path: %v", err)
	}
	q = resolve.Query{Name: "npx", Path: guardBin, Self: self, HaveSelf: true}
	if _, err := resolve.Real(q); err == nil {
		t.Fatal("manifest path pointing at guard itself was accepted")
	}
}

func TestLookPath(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "noexec", "cmake"), 0o644)
	os.MkdirAll(filepath.Join(root, "dir", "cmake"), 0o755) // a folder, not a command
	want := filepath.Join(root, "bin", "cmake")
	write(t, want, 0o755)
	write(t, filepath.Join(root, "later", "cmake"), 0o755)
	t.Chdir(root)
	write(t, filepath.Join(root, "cmake"), 0o755) // in the current folder

	path := strings.Join([]string{"", ".", "bin", filepath.Join(root, "noexec"), filepath.Join(root, "dir"), filepath.Join(root, "bin"), filepath.Join(root, "later")}, ":")
	if got, ok := resolve.LookPath("cmake", path); !ok || got != want {
		t.Fatalf("LookPath = %q, %v; want %q", got, ok, want)
	}
	if got, ok := resolve.LookPath("cmake", ":.:bin"); ok {
		t.Fatalf("LookPath found %q through an empty or relative entry", got)
	}
	if _, ok := resolve.LookPath("absent", path); ok {
		t.Fatal("LookPath found a missing command")
	}
}

// A manifest path that is there but lacks the execute bit is not "not
// found": it is the shell's "not executable", with the path to chmod. A
// PATH search still passes over such a file, as a shell does.
func TestManifestPathNotExecutable(t *testing.T) {
	root := t.TempDir()
	noexec := filepath.Join(root, "tool")
	write(t, noexec, 0o644)
	_, err := resolve.Real(resolve.Query{Name: "tool", Path: noexec})
	var ne *resolve.NotExecutableError
	if !errors.As(err, &ne) || ne.Path != noexec || err.Error() != noexec+" is not executable" {
		t.Fatalf("Real = %v, want %s not executable", err, noexec)
	}
	if !errors.Is(err, syscall.EACCES) {
		t.Fatalf("%v does not match EACCES, what exec would say", err)
	}
	os.MkdirAll(filepath.Join(root, "dir"), 0o755)
	if _, err := resolve.Real(resolve.Query{Name: "tool", Path: filepath.Join(root, "dir")}); errors.As(err, &ne) {
		t.Fatalf("a folder is %v, want not found", err)
	}
	_, err = resolve.Real(resolve.Query{Name: "tool", PathEnv: root, ShimDir: filepath.Join(root, "shim")})
	var nf *resolve.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("a PATH search: %v, want not found", err)
	}
}
