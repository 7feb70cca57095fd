package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
// which only read and checksum them.
func makeDist(t *testing.T) string {
	t.Helper()
	exe := guardBinary(t)
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dist := t.TempDir()
	var sums []string
	for _, arch := range Arches {
		bin := exe
		if arch != runtime.GOARCH {
			bin = []byte("#!/bin/sh\necho placeholder for " + arch + "\n")
		}
		name := ArchiveName(testVersion, arch)
		data := tarGz(t, map[string]archived{"README.md": {0o644, readme}, "guard": {0o755, bin}})
		if err := os.WriteFile(filepath.Join(dist, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		sums = append(sums, hex.EncodeToString(sum[:])+"  "+name+"\n")
	}
	sort.Strings(sums)
	write(t, filepath.Join(dist, ChecksumsName), strings.Join(sums, ""))
	write(t, filepath.Join(dist, "metadata.json"), fmt.Sprintf(`{"project_name":"guard","tag":"v0.0.0","version":%q,"commit":%q,"date":"2026-01-02T03:04:05Z"}`, testVersion, testCommit))
	return dist
}

// tarGz is a flat .tar.gz as goreleaser makes it.
func tarGz(t *testing.T, files map[string]archived) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: int64(f.mode), Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
