package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newStashCommand() *cli.Command {
	return &cli.Command{
		Name:      "stash",
		Usage:     "list the stash of builds, or export it, signed, for other machines",
		UsageText: usage("guard stash list [--json] [oci://HOST/REPO] | guard stash export DIR | guard stash push [BUILD…] oci://HOST/REPO | guard stash keygen [NAME] | guard stash key BUILD", "guard stash push oci://ghcr.io/acme/guard-stash"),
		Subcommands: []*cli.Command{
			newStashListCommand(), newStashExportCommand(), newStashPushCommand(), newStashKeyCommand(), newStashKeygenCommand(),
		},
	}
}

func newStashListCommand() *cli.Command {
	return &cli.Command{
		Name:      "list",
		Usage:     "every entry (of the local stash, or of a registry), its size and whether it matches its recipe now",
		UsageText: usage("guard stash list [--json] [oci://HOST/REPO]", "guard stash list"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in docs/stash.md)"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runStashList(e, ctx.Args().Slice(), ctx.Bool("json"))
		}),
	}
}

// runStashList lists the local stash, or with one argument a registry's.
func runStashList(e *guard.Engine, args []string, asJSON bool) error {
	switch len(args) {
	case 0:
		return commands.StashList(e, e.Config().Stdout, asJSON)
	case 1:
		return commands.StashListRemote(e, e.Config().Stdout, args[0], asJSON)
	}
	return cli.Exit("stash list takes at most one registry: guard stash list [oci://HOST/REPO]", 2)
}

func newStashExportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "copy every entry, checked and signed, into DIR with an index: a stash_from source",
		UsageText: usage("guard stash export DIR", "guard stash export /mnt/shared/guard-stash"),
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			if ctx.NArg() != 1 {
				return cli.Exit("stash export needs one folder: guard stash export DIR", 2)
			}
			return commands.StashExport(e, e.Config().Stdout, ctx.Args().First())
		}),
	}
}

// stashPushOptions are `guard stash push`'s flag and arguments.
type stashPushOptions struct {
	entry string   // --entry: only the entry of this key
	lease string   // --lease: the fleet's lease the push lets go of
	args  []string // [BUILD…] oci://HOST/REPO
}

func newStashPushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "push the local entries (of the builds named, else all), signed, to a registry: a stash_from source",
		UsageText: usage("guard stash push [--entry KEY] [BUILD…] oci://HOST[:PORT]/REPO", "guard stash push llama-cpp oci://ghcr.io/acme/guard-stash"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "entry", Usage: "push only the entry of this key (with one BUILD), saying so on stderr: what stash_to runs"},
			&cli.StringFlag{Name: "lease", Usage: "with --entry: hold the fleet's lease of this id while pushing, then let it go (what a build that held it runs)"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runStashPush(e, stashPushOptions{entry: ctx.String("entry"), lease: ctx.String("lease"), args: ctx.Args().Slice()})
		}),
	}
}

// runStashPush takes the registry last. With --entry it is what stash_to
// runs: its stdout is /dev/null, its stderr the push log, so it prints
// there.
func runStashPush(e *guard.Engine, o stashPushOptions) error {
	args := o.args
	if len(args) == 0 || !strings.HasPrefix(args[len(args)-1], "oci://") {
		return cli.Exit("stash push needs a registry last: guard stash push [BUILD…] oci://HOST/REPO", 2)
	}
	out := e.Config().Stdout
	if o.entry != "" {
		out = e.Config().Stderr
	}
	if o.lease != "" && o.entry == "" {
		return cli.Exit("stash push --lease goes with --entry: guard stash push --entry KEY --lease ID BUILD oci://HOST/REPO", 2)
	}
	return commands.StashPush(e, out, args[:len(args)-1], commands.PushOne{Entry: o.entry, Lease: o.lease}, args[len(args)-1])
}

func newStashKeyCommand() *cli.Command {
	return &cli.Command{
		Name:      "key",
		Usage:     "the key a build of BUILD would be stashed under now, and every input it is made of",
		UsageText: usage("guard stash key [--json] BUILD", "guard stash key llama-cpp"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in docs/stash.md)"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			if ctx.NArg() != 1 {
				return cli.Exit("stash key needs one build recipe: guard stash key BUILD", 2)
			}
			return commands.StashKey(e, e.Config().Stdout, ctx.Args().First(), ctx.Bool("json"))
		}),
	}
}

func newStashKeygenCommand() *cli.Command {
	return &cli.Command{
		Name:      "keygen",
		Usage:     "make the key pair that signs exported entries; prints the public key to trust",
		UsageText: usage("guard stash keygen [NAME]", "guard stash keygen fleet-1"),
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			if ctx.NArg() > 1 {
				return cli.Exit("stash keygen takes at most one name: guard stash keygen [NAME]", 2)
			}
			return commands.StashKeygen(e, e.Config().Stdout, ctx.Args().First())
		}),
	}
}
