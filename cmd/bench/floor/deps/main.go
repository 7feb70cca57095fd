// Command deps is the zap floor shim plus the package initialisation of
// the other libraries the product owner chose for guard (urfave/cli,
// creack/pty, gofrs/flock): what any shim that links them pays before
// main, measured apart from guard's own code. guard's exec path against
// this row, next to its ratio to the zap floor, says how much of the gap
// is theirs.
//
// It execs $SHIM_TARGET with its own argv and environment.
package main

import (
	"os"
	"syscall"

	_ "net/http"

	_ "github.com/creack/pty"
	_ "github.com/gofrs/flock"
	_ "github.com/urfave/cli/v2"
	_ "go.uber.org/zap"
)

func main() {
	target := os.Getenv("SHIM_TARGET")
	if target == "" {
		os.Stderr.WriteString("deps: SHIM_TARGET is not set\n")
		os.Exit(127)
	}
	err := syscall.Exec(target, os.Args, os.Environ())
	// Exec returns only on failure.
	os.Stderr.WriteString("deps: exec " + target + ": " + err.Error() + "\n")
	os.Exit(126)
}
