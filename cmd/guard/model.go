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
		UsageText: usage("guard model push FILE oci://HOST/REPO[:TAG]", "guard model push ~/models/qwen.gguf oci://ghcr.io/acme/models/qwen:q4"),
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runModelPush(e, ctx.Args().Slice())
		}),
	}
}

// runModelPush takes a file and a registry, in that order.
func runModelPush(e *guard.Engine, args []string) error {
	if len(args) != 2 || !strings.HasPrefix(args[1], "oci://") {
		return cli.Exit("model push needs a file and a registry: guard model push FILE oci://HOST/REPO[:TAG]", 2)
	}
	return commands.ModelPush(e, e.Config().Stdout, args[0], args[1])
}
