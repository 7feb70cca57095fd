package guard

import (
	"context"

	"github.com/sandbox-guard/guard/guard/runner"
)

// Shim runs one call of the shim name with args (argv without argv[0]) in
// the world w and returns its exit status (docs/exit-status-and-events.md,
// "Exit status of a shim call"): load the configuration, mend evicted shims, call. When guard
// itself cannot work, the tool runs unguarded.
func Shim(w World, name string, args []string) int {
	return shim(w, name, args, runner.Exec)
}

func shim(w World, name string, args []string, exec execFunc) int {
	c, err := loadConfig(w, true)
	if err != nil {
		return unguarded(w, name, args, err, exec)
	}
	e := New(c)
	defer e.Close()
	e.exec = exec
	if c.Debug {
		e.debug("manifest %s; state %s; depth %d", c.M.Source, c.StateDir, c.Depth)
	}
	e.mendShims()
	return e.call(context.Background(), name, args)
}
