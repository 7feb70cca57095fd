package commands

import (
	"os"
	"path/filepath"
	"testing"
)

// guard status says "broken" for a copy of guard that is empty or cut off:
// it exists, but every shim would run nothing or crash.
func TestShimStateBrokenCopy(t *testing.T) {
	t.Parallel()
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		data []byte
		want State
	}{
		{"whole", exe, "ok"},
		{"empty", nil, "broken"},
		{"cut off", exe[:len(exe)/3], "broken"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "guard"), tt.data, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := shimState(dir, "guard"); got.State != tt.want {
			t.Errorf("%s copy: state %q, want %q", tt.name, got.State, tt.want)
		}
	}
}
