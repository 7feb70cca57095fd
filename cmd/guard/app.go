package main

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func runApp(w guard.World, args []string) int {
	app := newApp(w)
	err := app.Run(args)
	var coder cli.ExitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &coder):
		if msg := err.Error(); msg != "" {
			guard.Tell(w.Stderr, msg)
		}
		return coder.ExitCode()
	default:
		guard.Tell(w.Stderr, err.Error())
		return 1
	}
}

// worldKey is where the app keeps the World its actions run in.
const worldKey = "guard.world"

func newApp(w guard.World) *cli.App {
	app := &cli.App{
		Metadata:             map[string]any{worldKey: w},
		Writer:               w.Stdout,
		ErrWriter:            w.Stderr,
		Name:                 "guard",
		Usage:                "keep agent sandbox scripts from hanging: heal evicted tools and models, force non-interactive flags, enforce time budgets",
		Version:              versionString(),
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		ExitErrHandler:       func(*cli.Context, error) {}, // runApp prints errors once, in guard's voice
		Commands: []*cli.Command{
			installCommand, uninstallCommand, statusCommand, healCommand, execCommand,
			askCommand, cacheCommand, manifestCommand, completionCommand,
		},
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verbose", Usage: "print each decision of a call on stderr (as GUARD_DEBUG=1 does for shims): guard --verbose exec NAME -- ARGS"},
		},
		OnUsageError: usageError("guard"),
		Action:       rootAction,
	}
	for _, cmd := range app.Commands {
		strict(cmd, "guard "+cmd.Name)
	}
	return app
}

// usage is a command's UsageText: its synopsis and one example to copy.
func usage(synopsis, example string) string {
	return synopsis + "\n\nexample:\n   " + example
}

// strict makes a bad flag on cmd (and its subcommands) a short error with
// exit status 2 instead of a page of help, and hides the help subcommand
// that urfave/cli would add next to real ones.
func strict(cmd *cli.Command, fullName string) {
	cmd.OnUsageError = usageError(fullName)
	cmd.HideHelpCommand = true
	for _, sub := range cmd.Subcommands {
		strict(sub, fullName+" "+sub.Name)
	}
}

func usageError(fullName string) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		return cli.Exit(fmt.Sprintf("%v; see %s --help", err, fullName), 2)
	}
}

// rootAction runs for `guard` with no command (help) or a word that names
// no command (exit 2). `guard help CMD` still works as CMD --help.
func rootAction(ctx *cli.Context) error {
	args := ctx.Args()
	switch {
	case args.Len() == 0:
		return cli.ShowAppHelp(ctx)
	case args.First() == "help" && args.Len() > 1:
		return cli.ShowCommandHelp(ctx, args.Get(1))
	case args.First() == "help":
		return cli.ShowAppHelp(ctx)
	}
	return cli.Exit(fmt.Sprintf("%q is not a guard command; see guard --help", args.First()), 2)
}

func versionString() string {
	commit := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
				if len(commit) > 12 {
					commit = commit[:12]
				}
			}
		}
	}
	return fmt.Sprintf("%s (commit %s, %s)", version, commit, runtime.Version())
}

// worldOf is the World the app was started in, verbose when the global
// --verbose flag was given.
func worldOf(ctx *cli.Context) guard.World {
	w := ctx.App.Metadata[worldKey].(guard.World)
	w.Verbose = ctx.Bool("verbose")
	return w
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

var installCommand = &cli.Command{
	Name:      "install",
	Usage:     "put guard first in PATH: copy it to the shim folder and link every manifest tool to it",
	UsageText: usage("guard install [--shim-dir D] [--no-rc] [--force]", "guard install && export PATH=\"$HOME/.shim:$PATH\""),
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "shim-dir", Usage: "where the shims go", EnvVars: []string{"GUARD_SHIM_DIR"}},
		&cli.BoolFlag{Name: "no-rc", Usage: "do not add the PATH block to ~/.bashrc and ~/.profile"},
		&cli.BoolFlag{Name: "force", Usage: "replace files in the shim folder that are not guard's links"},
	},
	Action: withEngineAsIs(func(ctx *cli.Context, e *guard.Engine) error {
		c := *e.Config()
		if d := ctx.String("shim-dir"); d != "" {
			c.ShimDir = d
		}
		return commands.Install(&c, c.Stdout, ctx.Bool("no-rc"), ctx.Bool("force"))
	}),
}

var uninstallCommand = &cli.Command{
	Name:      "uninstall",
	Usage:     "remove the shim links, guard's copy and the PATH block; models, cache and log stay",
	UsageText: usage("guard uninstall", "guard uninstall"),
	Action: withEngineAsIs(func(ctx *cli.Context, e *guard.Engine) error {
		return commands.Uninstall(e.Config(), e.Config().Stdout)
	}),
}

var statusCommand = &cli.Command{
	Name:      "status",
	Usage:     "show shims, real targets, builds, packages, models, auth, cache and the last heal events; exit 1 when something needs healing",
	UsageText: usage("guard status [--json] [--events N] [--since 1h]", "guard status --events 20 --since 2h"),
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in the README)"},
		&cli.IntFlag{Name: "events", Value: 10, Usage: "how many of the last heal events to show (0: none)"},
		&cli.StringFlag{Name: "since", Usage: "only events newer than a duration (30m, 2h, 1d) or a time (2026-08-01T15:04)"},
	},
	Action: func(ctx *cli.Context) error {
		since, err := commands.ParseSince(ctx.String("since"), time.Now())
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		if ctx.Int("events") < 0 {
			return cli.Exit("--events must be 0 or more", 2)
		}
		e, err := engine(ctx, true)
		if err != nil {
			return err
		}
		defer e.Close()
		o := commands.StatusOptions{JSON: ctx.Bool("json"), Events: ctx.Int("events"), Since: since, Colour: commands.UseColour(e.Config())}
		healthy, err := commands.Status(e, e.Config().Stdout, o)
		if err != nil {
			return cli.Exit(err.Error(), 125)
		}
		if !healthy {
			return cli.Exit("", 1)
		}
		return nil
	},
}

var healCommand = &cli.Command{
	Name:      "heal",
	Usage:     "heal everything now (or the named tools and models): shims, packages, builds, models, auth",
	UsageText: usage("guard heal [NAME...]", "guard heal llama-completion Qwen3-0.6B-Q4_K_M.gguf"),
	Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
		if !commands.Heal(ctx.Context, e, e.Config().Stdout, ctx.Args().Slice()) {
			return cli.Exit("some things could not be healed (see above)", 1)
		}
		return nil
	}),
}

var execCommand = &cli.Command{
	Name:            "exec",
	Usage:           "run NAME exactly as its shim would",
	UsageText:       usage("guard exec NAME -- ARGS...", "guard exec npx -- cowsay hi"),
	SkipFlagParsing: true,
	Action: func(ctx *cli.Context) error {
		args := ctx.Args().Slice()
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			return cli.ShowSubcommandHelp(ctx) // flags are not parsed here, so --help arrives as an argument
		}
		if len(args) == 0 {
			return cli.Exit("exec needs a tool name: guard exec NAME -- ARGS...", 2)
		}
		name, rest := args[0], args[1:]
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		if code := guard.Shim(worldOf(ctx), name, rest); code != 0 {
			return cli.Exit("", code)
		}
		return nil
	},
}

var askCommand = &cli.Command{
	Name:      "ask",
	Usage:     "ask the local model swarm: a short casual prompt goes to SCOUT alone, anything else to every role in parallel",
	UsageText: usage("guard ask [--json] [--role R] PROMPT", "guard ask \"what is a GGUF file?\""),
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "one JSON object per role"},
		&cli.StringFlag{Name: "role", Usage: "ask only this swarm role"},
	},
	Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
		code := commands.Ask(ctx.Context, e, e.Config().Stdout, commands.AskOptions{JSON: ctx.Bool("json"), Role: ctx.String("role"), Prompt: ctx.Args().Slice()})
		if code != 0 {
			return cli.Exit("", code)
		}
		return nil
	}),
}

var cacheCommand = &cli.Command{
	Name:      "cache",
	Usage:     "prompt cache figures, or empty it",
	UsageText: usage("guard cache stats | guard cache clear", "guard cache stats"),
	Subcommands: []*cli.Command{
		{
			Name:      "stats",
			Usage:     "entries, bytes, hits, misses and seconds saved",
			UsageText: usage("guard cache stats", "guard cache stats"),
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				return commands.CacheStats(e, e.Config().Stdout)
			}),
		},
		{
			Name:      "clear",
			Usage:     "remove every cached answer",
			UsageText: usage("guard cache clear", "guard cache clear"),
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				return commands.CacheClear(e, e.Config().Stdout)
			}),
		},
	},
}

var manifestCommand = &cli.Command{
	Name:      "manifest",
	Usage:     "validate, print or pin the manifest",
	UsageText: usage("guard manifest check [FILE] | guard manifest show | guard manifest pin", "guard manifest check ~/.config/guard/manifest.toml"),
	Subcommands: []*cli.Command{
		{
			Name:      "check",
			Usage:     "validate a manifest (default: the effective one); errors name the file and line",
			UsageText: usage("guard manifest check [FILE]", "guard manifest check my-manifest.toml"),
			Action: func(ctx *cli.Context) error {
				w := worldOf(ctx)
				return exitErr(commands.ManifestCheck(w.Stdout, ctx.Args().First(), w.Getenv("HOME")), 125)
			},
		},
		{
			Name:      "show",
			Usage:     "print the effective manifest",
			UsageText: usage("guard manifest show", "guard manifest show > my-manifest.toml"),
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				return e.Config().M.Encode(e.Config().Stdout)
			}),
		},
		{
			Name:      "pin",
			Usage:     "hash every model that passes size and header and write its sha256 into the user manifest",
			UsageText: usage("guard manifest pin", "guard heal && guard manifest pin"),
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				return commands.Pin(e, e.Config().Stdout)
			}),
		},
	},
}

var completionCommand = &cli.Command{
	Name:      "completion",
	Usage:     "print the shell completion script (bash or zsh)",
	UsageText: usage("guard completion bash|zsh", "source <(guard completion bash)"),
	Action: func(ctx *cli.Context) error {
		switch ctx.Args().First() {
		case "", "bash":
			fmt.Fprint(ctx.App.Writer, bashCompletion)
		case "zsh":
			fmt.Fprint(ctx.App.Writer, zshCompletion)
		default:
			return cli.Exit(fmt.Sprintf("no completion for %q: use bash or zsh", ctx.Args().First()), 2)
		}
		return nil
	},
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

// exitErr turns an error into guard's message and the given status.
func exitErr(err error, code int) error {
	if err == nil {
		return nil
	}
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		return err
	}
	return cli.Exit(err.Error(), code)
}
