package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// The tests build a release-shaped dist/ without goreleaser: go build with
// .goreleaser.yaml's flags for this machine, archives named by ArchiveName
// (tar and gzip in Go), checksums.txt in goreleaser's "SHA256  NAME" lines
// and the metadata.json fields cmd/release reads. CI checks goreleaser's
// own dist/ with the same check (.ci/run).
const (
	testVersion = "0.0.1-test"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
)

var built struct {
	once sync.Once
	exe  []byte
	err  error
}

// guardBinary is a static guard for this machine, stamped as a release
// stamps it; built once per test run (a few seconds with a warm cache).
func guardBinary(t *testing.T) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds guard with go build (slow); skipped with -short")
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "release-build-")
		if err != nil {
			built.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "guard")
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "urfave_cli_no_docs",
			"-ldflags", fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.date=2026-01-02T03:04:05Z", testVersion, testCommit),
			"-o", out, "./cmd/guard")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, msg)
			return
		}
		built.exe, built.err = os.ReadFile(out)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.exe
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// makeDist writes a dist folder: this machine's archive holds the real
// guard; the other architectures' hold a placeholder (building them would
// cost a cross-compile of everything), enough for the npm and skill makers,
// which only read and checksum them. Its files are made once per test run
// (the gzip of a real guard takes seconds under the race detector) and
// written afresh for each test, which may change its own copy.
func makeDist(t *testing.T) string {
	t.Helper()
	files := distFiles(t)
	dist := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dist, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dist
}

var distMade struct {
	once  sync.Once
	files map[string][]byte
	err   error
}

// distFiles are the files of makeDist's folder, by name.
func distFiles(t *testing.T) map[string][]byte {
	t.Helper()
	exe := guardBinary(t)
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	distMade.once.Do(func() {
		files := map[string][]byte{}
		var sums []string
		for _, arch := range Arches {
			bin := exe
			if arch != runtime.GOARCH {
				bin = []byte("#!/bin/sh\necho placeholder for " + arch + "\n")
			}
			name := ArchiveName(testVersion, arch)
			data, err := tarGz(map[string]archived{"README.md": {0o644, readme}, "guard": {0o755, bin}})
			if err != nil {
				distMade.err = err
				return
			}
			files[name] = data
			sum := sha256.Sum256(data)
			sums = append(sums, hex.EncodeToString(sum[:])+"  "+name+"\n")
		}
		sort.Strings(sums)
		files[ChecksumsName] = []byte(strings.Join(sums, ""))
		files["metadata.json"] = []byte(fmt.Sprintf(`{"project_name":"guard","tag":"v0.0.0","version":%q,"commit":%q,"date":"2026-01-02T03:04:05Z"}`, testVersion, testCommit))
		distMade.files = files
	})
	if distMade.err != nil {
		t.Fatal(distMade.err)
	}
	return distMade.files
}

// tarGz is a flat .tar.gz as goreleaser makes it.
func tarGz(files map[string]archived) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, n := range slices.Sorted(maps.Keys(files)) {
		f := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: int64(f.mode), Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
