package install_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/install"
)

// An empty or cut-off copy of guard is told from a whole one by its ELF
// header alone; this test's own executable stands in for guard.
func TestCopyProblem(t *testing.T) {
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"whole", write("whole", exe, 0o755), ""},
		{"empty", write("empty", nil, 0o755), "empty (0 bytes)"},
		{"cut near the end", write("cut-end", exe[:len(exe)-1], 0o755), "cut off"},
		{"cut in half", write("cut-half", exe[:len(exe)/2], 0o755), "cut off"},
		{"only the header", write("cut-header", exe[:64], 0o755), "cut off"},
		{"cut inside the header", write("cut-inside", exe[:20], 0o755), "cut off (20 of 64 bytes)"},
		{"not executable", write("noexec", exe, 0o644), "not executable"},
		{"a script", write("script", []byte("#!/bin/sh\necho hi\n"), 0o755), "not an ELF executable"},
		{"missing", filepath.Join(dir, "nothing"), ""},
	}
	for _, tt := range tests {
		got := install.CopyProblem(tt.path)
		if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s: CopyProblem = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// Repair brings back an empty copy, the state a truncating eviction leaves.
func TestRepairMendsAnEmptyCopy(t *testing.T) {
	dir := t.TempDir()
	shims, stateDir := filepath.Join(dir, "shims"), filepath.Join(dir, "state")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shims, install.GuardName), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	done, err := install.Repair(shims, stateDir, "/proc/self/exe", nil, "")
	if err != nil || strings.Join(done, ",") != install.GuardName {
		t.Fatalf("Repair = %v, %v; want guard re-created", done, err)
	}
	if p := install.CopyProblem(filepath.Join(shims, install.GuardName)); p != "" {
		t.Fatalf("after Repair the copy is %s", p)
	}
}
