// Command minimal is the cheapest Go execve shim: the lower bound a Go
// shim can reach on this machine, to compare guard's start-up against.
//
// It execs $SHIM_TARGET (an absolute path, resolved once by the caller so
// no PATH search is timed) with its own argv and environment.
package main

import (
	"os"
	"syscall"
)

func main() {
	target := os.Getenv("SHIM_TARGET")
	if target == "" {
		os.Stderr.WriteString("minimal: SHIM_TARGET is not set\n")
		os.Exit(127)
	}
	err := syscall.Exec(target, os.Args, os.Environ())
	// Exec returns only on failure.
	os.Stderr.WriteString("minimal: exec " + target + ": " + err.Error() + "\n")
	os.Exit(126)
}
