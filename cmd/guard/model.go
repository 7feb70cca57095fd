package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newModelCommand() *cli.Command {
	return &cli.Command{
		Name:        "model",
		Usage:       "push a model to an OCI registry, where a fleet's manifests name it",
		UsageText:   usage("guard model push FILE oci://HOST/REPO[:TAG]", "guard model push ~/models/qwen.gguf oci://ghcr.io/acme/models/qwen:q4"),
		Subcommands: []*cli.Command{newModelPushCommand()},
	}
}

func newModelPushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "push a GGUF file as one raw layer (its digest is its sha256) and print the manifest lines that name it",
		UsageText: usage("guard model push [--lease ID] FILE oci://HOST/REPO[:TAG]", "guard model push ~/models/qwen.gguf oci://ghcr.io/acme/models/qwen:q4"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "lease", Usage: "hold the fleet's lease of this id while pushing, then let it go (what a download for the fleet runs, push_to)"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runModelPush(e, ctx.String("lease"), ctx.Args().Slice())
		}),
	}
}

// runModelPush takes a file and a registry, in that order.
// With --lease it is what push_to runs: its stdout is /dev/null, its
// stderr the push log.
func runModelPush(e *guard.Engine, leaseID string, args []string) error {
	if len(args) != 2 || !strings.HasPrefix(args[1], "oci://") {
		return cli.Exit("model push needs a file and a registry: guard model push FILE oci://HOST/REPO[:TAG]", 2)
	}
	if leaseID != "" {
		return commands.ModelPushUnderLease(e, e.Config().Stderr, args[0], args[1], leaseID)
	}
	return commands.ModelPush(e, e.Config().Stdout, args[0], args[1])
}
