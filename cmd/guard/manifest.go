package main

import (
	"context"
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newManifestCommand() *cli.Command {
	return &cli.Command{
		Name:        "manifest",
		Usage:       "validate, print or pin the manifest",
		UsageText:   usage("guard manifest check [FILE] | guard manifest show | guard manifest pin", "guard manifest check ~/.config/guard/manifest.toml"),
		Subcommands: []*cli.Command{newManifestCheckCommand(), newManifestShowCommand(), newManifestPinCommand()},
	}
}

func newManifestCheckCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "validate a manifest (default: the effective one); errors name the file and line",
		UsageText: usage("guard manifest check [FILE]", "guard manifest check my-manifest.toml"),
		Action: func(ctx *cli.Context) error {
			return runManifestCheck(ctx, ctx.Args().First())
		},
	}
}

// runManifestCheck validates file ("" the manifest in use), then links
// the tools of the manifest in use when that is the one checked; a bad
// manifest is exit 125.
func runManifestCheck(ctx *cli.Context, file string) error {
	w := worldOf(ctx)
	if err := commands.ManifestCheck(w.Stdout, file, w.Getenv("GUARD_MANIFEST"), w.Getenv("HOME")); err != nil {
		return exitErr(err, 125)
	}
	e, err := engine(ctx, false)
	if err != nil {
		if file != "" {
			return nil // FILE is fine; the manifest in use is not FILE
		}
		return err
	}
	defer e.Close()
	commands.LinkTools(e, w.Stdout, file)
	return nil
}

func newManifestShowCommand() *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print the manifest in use as written (the user's file with its comments, else the embedded default); --json: the effective one",
		UsageText: usage("guard manifest show [--json]", "guard manifest show > my-manifest.toml"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "the effective manifest (defaults applied, paths expanded) as one JSON object"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return commands.ManifestShow(e, e.Config().Stdout, ctx.Bool("json"))
		}),
	}
}

// pinOptions are `guard manifest pin`'s flags.
type pinOptions struct {
	force  bool
	remote bool
}

func newManifestPinCommand() *cli.Command {
	return &cli.Command{
		Name:      "pin",
		Usage:     "hash every model that passes size and header and write its sha256 into the user manifest; a pinned model is verified, never re-pinned",
		UsageText: usage("guard manifest pin [--force] [--remote]", "guard heal && guard manifest pin"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "force", Usage: "pin each file as it is, even over a pin it does not match"},
			&cli.BoolFlag{Name: "remote", Usage: "take each sha256 from what the model's urls declare (Hugging Face's X-Linked-Etag), downloading nothing"},
		},
		Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
			return runPin(ctx.Context, e, pinOptions{force: ctx.Bool("force"), remote: ctx.Bool("remote")})
		}),
	}
}

// runPin: a model it could not pin is exit 1, a model to fix, not guard's
// own failure (125).
func runPin(ctx context.Context, e *guard.Engine, o pinOptions) error {
	err := commands.Pin(ctx, e, e.Config().Stdout, o.force, o.remote)
	if errors.As(err, new(*commands.UnpinnedError)) {
		return cli.Exit(err.Error(), 1)
	}
	return err
}
