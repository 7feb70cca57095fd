package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard/commands"
)

// statusOptions are `guard status`'s flags as given.
type statusOptions struct {
	json   bool
	events int
	since  string
}

func newStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show shims, real targets, builds, packages, models, auth, cache and the last heal events; exit 1 only when something that was here is broken or guard's setup is off (not fetched yet is exit 0)",
		UsageText: usage("guard status [--json] [--events N] [--since 1h]", "guard status --events 20 --since 2h"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in docs/status-json.md)"},
			&cli.IntFlag{Name: "events", Value: 10, Usage: "how many of the last heal events to show (0: none)"},
			&cli.StringFlag{Name: "since", Usage: "only events newer than a duration (30m, 2h, 1d) or a time (2026-08-01T15:04)"},
		},
		Action: func(ctx *cli.Context) error {
			return runStatus(ctx, statusOptions{json: ctx.Bool("json"), events: ctx.Int("events"), since: ctx.String("since")})
		},
	}
}

// runStatus checks the flags before it starts the engine: a bad one is
// exit 2 and mends nothing.
func runStatus(ctx *cli.Context, o statusOptions) error {
	since, err := commands.ParseSince(o.since, time.Now())
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if o.events < 0 {
		return cli.Exit("--events must be 0 or more", 2)
	}
	e, err := engine(ctx, true)
	if err != nil {
		return err
	}
	defer e.Close()
	healthy, err := commands.Status(e, e.Config().Stdout, commands.StatusOptions{
		JSON: o.json, Events: o.events, Since: since, Colour: commands.UseColour(e.Config()),
	})
	return commands.StatusExit(healthy, err)
}
