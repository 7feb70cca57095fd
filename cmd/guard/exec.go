package main

import (
	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
)

func newExecCommand() *cli.Command {
	return &cli.Command{
		Name:            "exec",
		Usage:           "run NAME exactly as its shim would",
		UsageText:       usage("guard exec NAME -- ARGS...", "guard exec npx -- cowsay hi"),
		SkipFlagParsing: true,
		BashComplete:    completeNames,
		Action:          runExec,
	}
}

// runExec is a shim call of the name given: its flags are not parsed, so
// --help arrives as an argument; the tool's status is exec's.
func runExec(ctx *cli.Context) error {
	args := ctx.Args().Slice()
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
		return cli.ShowSubcommandHelp(ctx)
	}
	if len(args) == 0 {
		return cli.Exit("exec needs a tool name: guard exec NAME -- ARGS...", 2)
	}
	name, rest := args[0], args[1:]
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if code := guard.Shim(worldOf(ctx), name, rest); code != 0 {
		return cli.Exit("", code)
	}
	return nil
}
