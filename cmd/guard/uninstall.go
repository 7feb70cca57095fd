package main

import (
	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newUninstallCommand() *cli.Command {
	return &cli.Command{
		Name:      "uninstall",
		Usage:     "remove the shim links, guard's copy, the PATH blocks, the hook files and what --system added; models, cache, log and manifest stay",
		UsageText: usage("guard uninstall", "guard uninstall"),
		Action: withEngineAsIs(func(_ *cli.Context, e *guard.Engine) error {
			return runUninstall(e)
		}),
	}
}

// runUninstall removes what install added, without mending the shim
// folder first.
func runUninstall(e *guard.Engine) error {
	return commands.Uninstall(e.Config(), e.Config().Stdout)
}
