package verify

import (
	"fmt"
	"os"
)

// RemoveStamp forgets what was recorded for path.
func RemoveStamp(stampDir, path string) error {
	_, name := stampPath(stampDir, path)
	if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove stamp: %w", err)
	}
	return nil
}

// Sum returns the hex sha256 of the file at path, the way Full hashes it.
func Sum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	sum, err := sumReader(f)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return sum, nil
}

// StampPath is the file that holds path's stamp.
func StampPath(stampDir, path string) string {
	_, name := stampPath(stampDir, path)
	return name
}
