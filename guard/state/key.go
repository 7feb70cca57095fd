package state

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// PathKey names a file after path: the hex of the first 16 bytes of the
// sha256 of its absolute form. Any path (spaces, slashes, a long name) gives
// one short name of fixed length, and two spellings of one path give the
// same name. Stamps, locks and failure records of a file are named by it.
func PathKey(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = filepath.Clean(path)
	}
	h := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(h[:16])
}

// Abs is path made absolute, as stamps key and hold it; path itself when
// the working folder cannot be read.
func Abs(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
