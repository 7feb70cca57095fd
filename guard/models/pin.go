package models

import (
	"fmt"
	"path/filepath"

	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/manifest"
)

// Pin hashes the model file at path, which must pass m's size and the GGUF
// header check, and returns its sha256 for `guard manifest pin` to record.
// The pin in m is ignored: pinning is how a new sum gets into the manifest.
// The full hash also stamps the file, so the next call's fast check trusts
// the new pin without hashing again.
func (h *Healer) Pin(m *manifest.Model, path string) (string, error) {
	st, sum, err := verify.Full(verify.Spec{Path: path, Size: m.Size}, h.stampDir())
	if err != nil {
		return "", fmt.Errorf("pin %s: %w", filepath.Base(path), err)
	}
	if !st.Healthy() {
		return "", fmt.Errorf("pin %s: the file is %s", filepath.Base(path), describeStatus(st))
	}
	return sum, nil
}
