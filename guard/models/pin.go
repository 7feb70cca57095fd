package models

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/manifest"
)

// Pin hashes the model file at path, which must pass m's size and the GGUF
// header check, and returns the sha256 for `guard manifest pin` to record.
// A model that already has a pin keeps it: the file is verified against
// it, and a file whose sum differs (changed in place, or another version)
// is a *PinMismatchError naming both, never a new pin; force pins the file
// as it is. The full hash also stamps the file, so the next call's fast
// check trusts the pin without hashing again.
func (h *Healer) Pin(m *manifest.Model, path string, force bool) (string, error) {
	s := verify.Spec{Path: path, Size: m.Size}
	if !force {
		s.SHA256 = m.SHA256
	}
	st, sum, err := verify.Full(s, h.stampDir())
	if err != nil {
		return "", fmt.Errorf("pin %s: %w", filepath.Base(path), err)
	}
	if st == verify.HashMismatch {
		return "", &PinMismatchError{File: m.File, Pinned: m.SHA256, Got: sum}
	}
	if !st.Healthy() {
		return "", fmt.Errorf("pin %s: the file is %s", filepath.Base(path), describeStatus(st))
	}
	return sum, nil
}

// PinMismatchError is a pinned model whose file on disk has another sum.
type PinMismatchError struct {
	File        string
	Pinned, Got string
}

func (e *PinMismatchError) Error() string {
	return fmt.Sprintf("%s: the file's sha256 is %s, but the manifest pins %s: the file changed or is another version; `guard heal %s` brings back the pinned file, or `guard manifest pin --force` pins the file as it is",
		e.File, e.Got, e.Pinned, e.File)
}

// Declared asks m's urls, in order, what they declare (a HEAD each, no
// download) and returns the first declaration of a sha256, for `guard
// manifest pin --remote`. A declared size other than m's is a
// *fetch.MismatchError naming both; no url declaring a sha256 is an error
// saying what to do instead.
func (h *Healer) Declared(ctx context.Context, m *manifest.Model) (fetch.Declared, error) {
	var errs []error
	for _, u := range m.URLs {
		d, err := fetch.Declare(ctx, h.Client, u, h.Token)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := d.Check(m.Size, ""); err != nil || d.SHA256 != "" {
			return d, err
		}
	}
	err := fmt.Errorf("no url of %s declares its sha256 (X-Linked-Etag); download it (`guard heal %s`), then `guard manifest pin` hashes it", m.File, m.File)
	return fetch.Declared{}, errors.Join(append([]error{err}, errs...)...)
}
