// Command guard keeps agent sandbox scripts from hanging. Called as guard it
// is a command-line tool (app.go); called through a shim link (npx,
// llama-completion, ...) it is that tool, healed and supervised.
package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-guard/guard/guard"
)

func main() { os.Exit(run(os.Args)) }

// run dispatches on argv[0], like busybox: a name starting with "guard" is
// the command-line tool, any other name is a shim call. A shim call never
// goes through urfave/cli, so the tool's own flags pass through untouched.
func run(args []string) (status int) {
	defer guard.Recover(&status)
	name := filepath.Base(args[0])
	if strings.HasPrefix(name, "guard") {
		return runApp(args)
	}
	return guard.Shim(name, args[1:], os.Stderr)
}
