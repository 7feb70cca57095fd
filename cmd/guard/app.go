package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
)

// runApp runs guard's command line in w and returns its exit status. Each
// command lives in a file of its own (install.go, heal.go, ...): its
// options, the constructor of its *cli.Command and the function that runs
// it; the exit decisions that are more than "failed: 1" are in package
// commands, where they are unit-tested. This file only assembles them.
func runApp(w guard.World, args []string) int {
	app := newApp(w)
	app.Metadata[argsKey] = args
	err := app.Run(args)
	var coder cli.ExitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &coder):
		if msg := err.Error(); msg != "" {
			guard.Tell(w.Stderr, msg)
		}
		return coder.ExitCode()
	default:
		guard.Tell(w.Stderr, err.Error())
		return 1
	}
}

// worldKey is where the app keeps the World its actions run in; argsKey
// its command line (completion reads the word being completed there).
const (
	worldKey = "guard.world"
	argsKey  = "guard.args"
)

// newApp is guard's command line: the commands, the global flags, and the
// strict usage rules of usage.go on every command.
func newApp(w guard.World) *cli.App {
	app := &cli.App{
		Metadata:             map[string]any{worldKey: w},
		Writer:               w.Stdout,
		ErrWriter:            w.Stderr,
		Name:                 "guard",
		Usage:                "keep agent sandbox scripts from hanging: heal evicted tools and models, force non-interactive flags, enforce time budgets",
		Version:              versionString(),
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		ExitErrHandler:       func(*cli.Context, error) {}, // runApp prints errors once, in guard's voice
		Commands: []*cli.Command{
			newInstallCommand(), newUninstallCommand(), newStatusCommand(), newHealCommand(),
			newWhichCommand(), newExecCommand(), newAskCommand(), newCacheCommand(), newStashCommand(),
			newModelCommand(), newManifestCommand(), newCompletionCommand(), newMendCommand(),
		},
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verbose", Usage: "print each decision of a call on stderr (as GUARD_DEBUG=1 does for shims): guard --verbose exec NAME -- ARGS"},
		},
		Action: rootAction,
	}
	app.OnUsageError = usageError("guard", func() []cli.Flag { return append(app.Flags, cli.VersionFlag, cli.HelpFlag) })
	for _, cmd := range app.Commands {
		strict(cmd, "guard "+cmd.Name)
	}
	return app
}
