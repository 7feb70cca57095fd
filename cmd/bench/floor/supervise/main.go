// Command supervise is the floor of a supervising shim: the zap floor's
// libraries, and instead of becoming $SHIM_TARGET it starts it as a child
// with the same argv, environment and stdio, waits for it and exits with
// its status. Nothing a Go program can do to watch a tool costs less, so
// guard's supervised path is compared to this row as well as to the zap
// floor.
package main

import (
	"os"
	"syscall"

	// As in the zap floor: linked and initialised, never called.
	_ "net/http"

	_ "go.uber.org/zap"
)

func main() {
	target := os.Getenv("SHIM_TARGET")
	if target == "" {
		os.Stderr.WriteString("supervise: SHIM_TARGET is not set\n")
		os.Exit(127)
	}
	pid, err := syscall.ForkExec(target, os.Args, &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		os.Stderr.WriteString("supervise: start " + target + ": " + err.Error() + "\n")
		os.Exit(126)
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ws.ExitStatus())
}
