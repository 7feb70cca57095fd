// Command zap is the "floor" execve shim: the minimal shim plus the
// package initialisation of the heavy libraries guard links (zap and
// net/http). guard cannot start faster than this without dropping them,
// so its goals are stated as ratios to this program.
//
// It execs $SHIM_TARGET with its own argv and environment.
package main

import (
	"os"
	"syscall"

	// Blank imports: linked and initialised, never called, as in guard's
	// hot path where the logger is created only when there is an event.
	_ "net/http"

	_ "go.uber.org/zap"
)

func main() {
	target := os.Getenv("SHIM_TARGET")
	if target == "" {
		os.Stderr.WriteString("zap: SHIM_TARGET is not set\n")
		os.Exit(127)
	}
	err := syscall.Exec(target, os.Args, os.Environ())
	// Exec returns only on failure.
	os.Stderr.WriteString("zap: exec " + target + ": " + err.Error() + "\n")
	os.Exit(126)
}
