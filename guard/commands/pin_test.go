package commands

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/verify"
)

// An unpinned model downloaded against a declared sha256 (a stamp with
// declared_by, so its fast check is ok) is still pinned, to the file's own
// sum: the "already pinned" shortcut is only for a model that has a pin.
func TestPinModelCheckedAgainstDeclaredSum(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	mf := "models_dir = \"~/models\"\n\n[[models]]\nfile = \"m.gguf\"\nsize = 4096\nurls = [\"https://huggingface.co/o/r/resolve/main/m.gguf\"]\n"
	e := statusEngine(t, mf, &out)
	c := e.Config()
	data := guardtest.GGUF(4096)
	path := c.M.ModelsPath("m.gguf")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := guardtest.Sum(data)
	if err := verify.WriteStamp(c.State().Stamps(), path, sum, "https://huggingface.co/o/r/resolve/main/m.gguf"); err != nil {
		t.Fatal(err)
	}
	if st := e.Models().Check(c.M.Models[0], path); st != verify.OK {
		t.Fatalf("check before pin: %s, want ok (the stamp records a declared sum)", st)
	}
	if err := Pin(context.Background(), e, &out, false, false); err != nil {
		t.Fatalf("pin: %v\n%s", err, out.String())
	}
	got, err := os.ReadFile(c.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), sum) {
		t.Errorf("manifest after pin does not hold the file's sha256 %s:\n%s\noutput:\n%s", sum, got, out.String())
	}
	if !strings.Contains(out.String(), "m.gguf: sha256 = "+sum) {
		t.Errorf("pin output does not name the new pin:\n%s", out.String())
	}
}
