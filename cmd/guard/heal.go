package main

import (
	"context"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

// healOptions are `guard heal`'s flags and names.
type healOptions struct {
	names      []string
	dryRun     bool
	json       bool
	background bool
	wait       bool
	prewarm    bool   // with background: at most once per 10 minutes
	job        string // the detached heal a call starts (hidden)
	caller     string // --for: the tool whose call started the job
}

func newHealCommand() *cli.Command {
	return &cli.Command{
		Name:      "heal",
		Usage:     "heal everything now (or the named tools and models): shims, packages, builds, models, auth",
		UsageText: usage("guard heal [--dry-run] [--json] [--background | --wait] [NAME...]", "guard heal --dry-run && guard heal llama-completion Qwen3-0.6B-Q4_K_M.gguf"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "say what a heal would do and what it costs (downloads, builds), and do nothing"},
			&cli.BoolFlag{Name: "json", Usage: "print the summary as one JSON object (schema in docs/status-json.md)"},
			&cli.BoolFlag{Name: "background", Usage: "detach, heal at low CPU and IO priority, and return at once"},
			&cli.BoolFlag{Name: "wait", Usage: "with NAME: wait for the heal a call left running in the background for NAME, with progress and no call's budget, then heal NAME if still broken; alone: wait for every heal in progress and heal nothing"},
			&cli.BoolFlag{Name: "prewarm", Hidden: true, Usage: "with --background: at most once per 10 minutes (the PATH block's prewarm hook)"},
			&cli.StringFlag{Name: "job", Hidden: true, Usage: "the detached heal a call starts: tool:NAME or model:PATH, its job's lock on fd 3"},
			&cli.StringFlag{Name: "for", Hidden: true, Usage: "with --job: the tool whose call started the heal, which its heal events name"},
		},
		BashComplete: completeNames,
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runHeal(ctx.Context, e, healOptions{
				names: ctx.Args().Slice(), dryRun: ctx.Bool("dry-run"), json: ctx.Bool("json"),
				background: ctx.Bool("background"), wait: ctx.Bool("wait"), prewarm: ctx.Bool("prewarm"),
				job: ctx.String("job"), caller: ctx.String("for"),
			})
		}),
	}
}

// runHeal is one of heal's four modes: the detached job, starting one in
// the background, waiting on those in progress (then, with names, healing
// what is still broken), or healing here.
func runHeal(ctx context.Context, e *guard.Engine, o healOptions) error {
	if o.job != "" {
		return commands.HealJobExit(e.RunJob(ctx, o.job, o.caller))
	}
	if o.background {
		return commands.HealBackground(e, o.names, o.prewarm)
	}
	if o.wait {
		followed, err := e.WaitHeals(ctx, o.names)
		v := commands.AfterWait(o.names, followed, err)
		for _, line := range v.Say {
			e.Say("%s", line)
		}
		if v.Done {
			return v.Exit
		}
	}
	ok, err := commands.Heal(ctx, e, e.Config().Stdout, commands.HealOptions{Names: o.names, DryRun: o.dryRun, JSON: o.json})
	if err != nil {
		return err
	}
	return commands.HealExit(ok)
}
