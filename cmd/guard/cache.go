package main

import (
	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newCacheCommand() *cli.Command {
	return &cli.Command{
		Name:        "cache",
		Usage:       "prompt cache figures, or empty it",
		UsageText:   usage("guard cache stats | guard cache clear", "guard cache stats"),
		Subcommands: []*cli.Command{newCacheStatsCommand(), newCacheClearCommand()},
	}
}

func newCacheStatsCommand() *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "entries, bytes, hits, misses and seconds saved",
		UsageText: usage("guard cache stats [--json]", "guard cache stats"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in docs/status-json.md)"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return commands.CacheStats(e, e.Config().Stdout, ctx.Bool("json"))
		}),
	}
}

func newCacheClearCommand() *cli.Command {
	return &cli.Command{
		Name:      "clear",
		Usage:     "remove every cached answer",
		UsageText: usage("guard cache clear", "guard cache clear"),
		Action: withEngine(func(_ *cli.Context, e *guard.Engine) error {
			return commands.CacheClear(e, e.Config().Stdout)
		}),
	}
}
