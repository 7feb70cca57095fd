package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCheck: a good dist passes for this machine, and the checker says
// what is wrong with a bad one: an archive whose bytes are not what
// checksums.txt says, a binary that is not a static ELF for its arch, an
// architecture with no archive.
func TestCheck(t *testing.T) {
	dist := makeDist(t)
	t.Chdir(repoRoot(t)) // check compares the archives' README with this one
	var out strings.Builder
	if err := check(dist, []string{runtime.GOARCH}, &out); err != nil {
		t.Fatalf("check of a good dist: %v\n%s", err, out.String())
	}
	if want := "runs: guard version " + testVersion + " (commit " + testCommit[:12] + ", go"; !strings.Contains(out.String(), want) {
		t.Errorf("check did not run guard --version (%q):\n%s", want, out.String())
	}

	// The placeholder the other architectures carry is no static ELF.
	for _, arch := range Arches {
		if arch == runtime.GOARCH {
			continue
		}
		if err := check(dist, Arches, &out); err == nil || !strings.Contains(err.Error(), "not an ELF") {
			t.Errorf("check passed a %s archive without an ELF guard: %v", arch, err)
		}
	}
	if err := check(dist, []string{runtime.GOARCH, "riscv64"}, &out); err == nil || !strings.Contains(err.Error(), "no "+ArchiveName(testVersion, "riscv64")) {
		t.Errorf("check of a missing architecture: %v", err)
	}

	name := filepath.Join(dist, ArchiveName(testVersion, runtime.GOARCH))
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	if err := check(dist, []string{runtime.GOARCH}, &out); err == nil || !strings.Contains(err.Error(), "says") {
		t.Errorf("check of a tampered archive: %v", err)
	}
}
