package main

import (
	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newWhichCommand() *cli.Command {
	return &cli.Command{
		Name:         "which",
		Usage:        "show what NAME runs: the real target, its binary and the libraries it loads, its build or package, its models; or a model file's state",
		UsageText:    usage("guard which NAME", "guard which llama-completion"),
		BashComplete: completeNames,
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runWhich(e, ctx.Args().Slice())
		}),
	}
}

// runWhich takes exactly one name; exit 1 when it is not there whole.
func runWhich(e *guard.Engine, args []string) error {
	if len(args) != 1 {
		return cli.Exit("which needs one tool or model name: guard which NAME", 2)
	}
	if !commands.Which(e, e.Config().Stdout, args[0]) {
		return cli.Exit("", 1)
	}
	return nil
}
