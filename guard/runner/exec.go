package runner

import (
	"fmt"
	"os"
	"syscall"
)

// Exec replaces guard with the tool: the fast path for a call that needs no
// budget, fallback or observer, so guard costs nothing once the tool runs.
// A nil env means guard's own environment; an empty argv means just path.
// It returns only when the exec failed; StartStatus maps the error.
func Exec(path string, argv, env []string) error {
	if len(argv) == 0 {
		argv = []string{path}
	}
	if env == nil {
		env = os.Environ()
	}
	if err := syscall.Exec(path, argv, env); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}
