package guard

import (
	"fmt"
	"runtime/debug"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
)

// Recover turns a panic anywhere in guard into exit status 125, a message for
// the person and a heal-log event, so that a bug in guard never looks like
// the tool's own failure. Use it as `defer guard.Recover(&status, w)`; the
// log is w's GUARD_LOG, else the default, since the manifest that may name
// another may be what failed.
func Recover(status *int, w World) {
	r := recover()
	if r == nil {
		return
	}
	fmt.Fprintf(w.Stderr, "guard: internal error: %v\nguard: please report it with the output of guard status and the stack below\n%s", r, debug.Stack())
	l := heallog.New(envOr(w, "GUARD_LOG", manifest.DefaultLog), w.Stderr)
	l.Write(heallog.Event{Level: "error", Event: heallog.CallEnd, Reason: fmt.Sprintf("panic: %v", r), Result: "failed"})
	l.Close()
	*status = runner.StatusGuardFailed
}
