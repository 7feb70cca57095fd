package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

// worldOf is the World the app was started in, verbose when the global
// --verbose flag was given.
func worldOf(ctx *cli.Context) guard.World {
	w := ctx.App.Metadata[worldKey].(guard.World)
	w.Verbose = ctx.Bool("verbose")
	return w
}

// argsOf is the command line the app was started with.
func argsOf(ctx *cli.Context) []string {
	args, _ := ctx.App.Metadata[argsKey].([]string)
	return args
}

// engine loads the configuration for a command and starts the engine on
// it; with repair it also mends the shim folder, as every guard invocation
// does but install and uninstall, which manage the folder themselves.
func engine(ctx *cli.Context, repair bool) (*guard.Engine, error) {
	c, err := guard.LoadConfig(worldOf(ctx))
	if err != nil {
		return nil, cli.Exit(err.Error(), guard.ExitStatus(err))
	}
	e := guard.New(c)
	if repair {
		e.Repair()
	}
	return e, nil
}

// withEngine is the action of a command that needs the engine: it loads
// the configuration (a bad manifest exits 125), mends the shims, runs the
// command, and turns a plain error into exit 125 (guard itself could not
// work); a cli.Exit passes.
func withEngine(run func(*cli.Context, *guard.Engine) error) cli.ActionFunc {
	return engineAction(true, run)
}

// withEngineAsIs is withEngine without the shim repair, for install and
// uninstall.
func withEngineAsIs(run func(*cli.Context, *guard.Engine) error) cli.ActionFunc {
	return engineAction(false, run)
}

func engineAction(repair bool, run func(*cli.Context, *guard.Engine) error) cli.ActionFunc {
	return func(ctx *cli.Context) error {
		e, err := engine(ctx, repair)
		if err != nil {
			return err
		}
		defer e.Close()
		return exitErr(run(ctx, e), 125)
	}
}

// exitErr turns an error into guard's message and the given status; a
// usage error is exit 2 whatever code says.
func exitErr(err error, code int) error {
	if err == nil {
		return nil
	}
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		return err
	}
	var usage *commands.UsageError
	if errors.As(err, &usage) {
		code = 2
	}
	return cli.Exit(err.Error(), code)
}
