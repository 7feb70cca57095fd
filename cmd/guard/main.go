// Command guard keeps agent sandbox scripts from hanging. Called as guard it
// is a command-line tool (app.go); called through a shim link (npx,
// llama-completion, ...) it is that tool, healed and supervised.
package main

import (
	"os"
	"path/filepath"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/progress"
)

func main() { os.Exit(run(os.Args)) }

// run dispatches on argv[0], like busybox: exactly "guard" is the
// command-line tool, any other name a shim call, a tool named guardrails
// or guard-x included (the manifest refuses only "guard" itself). A shim
// call never goes through urfave/cli, so the tool's own flags pass through
// untouched. The tests run this binary as "guard" too (main_test.go).
func run(args []string) (status int) {
	w := world()
	defer guard.Recover(&status, w)
	name := filepath.Base(args[0])
	if name == cliName {
		return runApp(w, args)
	}
	return guard.Shim(w, name, args[1:])
}

// cliName is the one name under which guard is its command-line tool.
const cliName = "guard"

// world reads what guard takes from outside itself, once: the environment,
// the standard descriptors and whether they are terminals. This is the
// edge; nothing below it reads them again.
func world() guard.World {
	return guard.World{
		Env:       os.Environ(),
		Stdin:     os.Stdin,
		Stdout:    os.Stdout,
		Stderr:    os.Stderr,
		StdinTTY:  progress.IsTerminal(os.Stdin),
		StdoutTTY: progress.IsTerminal(os.Stdout),
		Self:      "/proc/self/exe",
	}
}
