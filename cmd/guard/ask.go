package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newAskCommand() *cli.Command {
	return &cli.Command{
		Name:      "ask",
		Usage:     "ask the local model swarm: a short casual prompt goes to SCOUT alone, anything else to every role in parallel",
		UsageText: usage("guard ask [--json] [--role R] PROMPT", "guard ask \"what is a GGUF file?\""),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "one JSON object per role"},
			&cli.StringFlag{Name: "role", Usage: "ask only this swarm role"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runAsk(ctx.Context, e, commands.AskOptions{JSON: ctx.Bool("json"), Role: ctx.String("role"), Prompt: ctx.Args().Slice()})
		}),
	}
}

// runAsk ends with the status Ask decided.
func runAsk(ctx context.Context, e *guard.Engine, o commands.AskOptions) error {
	if code := commands.Ask(ctx, e, e.Config().Stdout, o); code != 0 {
		return cli.Exit("", code)
	}
	return nil
}
