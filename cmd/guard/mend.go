package main

import (
	"errors"
	"strings"

	"github.com/urfave/cli/v2"
)

// newMendCommand is what the PATH block runs at shell start when the shim
// folder changed since guard last checked its links (install.LinksStamp):
// the repair every command makes, and nothing else. It prints nothing when
// the folder is whole again, and one line when it cannot work (a broken
// manifest's two, joined): every shell start says it until it is fixed.
func newMendCommand() *cli.Command {
	return &cli.Command{
		Name:      "mend",
		Hidden:    true,
		Usage:     "bring back the shim links a sandbox evicted, silently (the PATH block runs it)",
		UsageText: usage("guard mend", "guard mend"),
		Action:    runMend,
	}
}

// runMend starts the engine, which mends the folder, and stops it.
func runMend(ctx *cli.Context) error {
	e, err := engine(ctx, true)
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		return cli.Exit(strings.ReplaceAll(err.Error(), "\n", "; "), coder.ExitCode())
	}
	if err != nil {
		return err
	}
	e.Close()
	return nil
}
