package guard

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/runner"
)

// Recover turns a panic anywhere in guard into exit status 125, a message for
// the person and a heal-log event, so that a bug in guard never looks like
// the tool's own failure. Use it as `defer guard.Recover(&status)`.
func Recover(status *int) {
	r := recover()
	if r == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "guard: internal error: %v\nguard: please report it with the output of guard status and the stack below\n%s", r, debug.Stack())
	path := os.Getenv("GUARD_LOG")
	if path == "" {
		path = "/tmp/selfheal.log"
	}
	l := heallog.New(path, os.Stderr)
	l.Write(heallog.Event{Level: "error", Event: "call.end", Reason: fmt.Sprintf("panic: %v", r), Result: "failed"})
	l.Close()
	*status = runner.StatusGuardFailed
}
