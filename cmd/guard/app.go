package main

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

// version, commit and date are stamped at build time with -ldflags "-X
// main.version=... -X main.commit=... -X main.date=..." (install.sh stamps
// the version, a release all three; docs/install.md).
var (
	version = "dev"
	commit  = ""
	date    = ""
)

func runApp(w guard.World, args []string) int {
	app := newApp(w)
	app.Metadata[argsKey] = args
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

// worldKey is where the app keeps the World its actions run in; argsKey
// its command line (completion reads the word being completed there).
const (
	worldKey = "guard.world"
	argsKey  = "guard.args"
)

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
			installCommand, uninstallCommand, statusCommand, healCommand, whichCommand, execCommand,
			askCommand, cacheCommand, stashCommand, modelCommand, manifestCommand, completionCommand, mendCommand,
		},
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verbose", Usage: "print each decision of a call on stderr (as GUARD_DEBUG=1 does for shims): guard --verbose exec NAME -- ARGS"},
		},
		Action: rootAction,
	}
	app.OnUsageError = usageError("guard", func() []cli.Flag { return append(app.Flags, cli.VersionFlag, cli.HelpFlag) })
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
	cmd.OnUsageError = usageError(fullName, func() []cli.Flag { return append(cmd.Flags, cli.HelpFlag) })
	cmd.HideHelpCommand = true
	if len(cmd.Subcommands) > 0 && cmd.Action == nil {
		cmd.Action = parentAction(cmd, fullName)
	}
	for _, sub := range cmd.Subcommands {
		strict(sub, fullName+" "+sub.Name)
	}
}

// usageError makes a usage mistake one line and exit 2; an unknown flag
// near one of flags gets it as a suggestion.
func usageError(fullName string, flags func() []cli.Flag) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		hint := ""
		if bad, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok && cli.SuggestFlag != nil {
			bad = strings.TrimLeft(bad, "-")
			if s := cli.SuggestFlag(flags(), bad, false); near(strings.TrimLeft(s, "-"), bad) {
				hint = " did you mean " + s + "?"
			}
		}
		return cli.Exit(fmt.Sprintf("%v;%s see %s --help", err, hint, fullName), 2)
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
	return notACommand("guard", args.First(), ctx.App.Commands)
}

// parentAction runs for a command that only groups others (cache,
// manifest): alone it is its help, with a word that names none of them a
// usage mistake.
func parentAction(cmd *cli.Command, fullName string) cli.ActionFunc {
	return func(ctx *cli.Context) error {
		if ctx.Args().Len() == 0 {
			return cli.ShowSubcommandHelp(ctx)
		}
		return notACommand(fullName, ctx.Args().First(), cmd.Subcommands)
	}
}

// notACommand is exit 2 for word under parent, with the command it most
// likely meant (urfave/cli's suggestion); "version" means --version.
func notACommand(parent, word string, commands []*cli.Command) error {
	msg := fmt.Sprintf("%q is not a %s command;", word, parent)
	switch {
	case parent == "guard" && strings.TrimLeft(word, "-") == "version":
		msg += " did you mean guard --version?"
	case cli.SuggestCommand != nil:
		if s := suggestCommand(commands, word); near(s, word) {
			msg += " did you mean " + parent + " " + s + "?"
		}
	}
	return cli.Exit(msg+" see "+parent+" --help", 2)
}

// near keeps urfave/cli's suggestions (the best match by Jaro-Winkler,
// however poor) to likely typos: the same first letter.
func near(suggestion, word string) bool {
	return suggestion != "" && word != "" && suggestion[0] == word[0]
}

// suggestCommand is urfave/cli's suggestion of the visible command nearest
// word, without the help command.
func suggestCommand(commands []*cli.Command, word string) string {
	var visible []*cli.Command
	for _, c := range commands {
		if !c.Hidden {
			visible = append(visible, &cli.Command{Name: c.Name})
		}
	}
	// SuggestCommand words its answer with this package-level template;
	// guard words the sentence itself.
	defer func(t string) { cli.SuggestDidYouMeanTemplate = t }(cli.SuggestDidYouMeanTemplate)
	cli.SuggestDidYouMeanTemplate = "%s"
	s := cli.SuggestCommand(visible, word)
	if s == "help" || s == "h" {
		return ""
	}
	return s
}

// versionString is what guard --version prints: the version, the commit
// (the stamped one, else the one go build recorded from the checkout) and
// the Go release, then the build date when a release stamped it. A
// `go install MODULE@vX` build has no stamp: the module's version stands in.
func versionString() string {
	v, c := version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	s := fmt.Sprintf("%s (commit %s, %s", v, c, runtime.Version())
	if date != "" {
		s += ", built " + date
	}
	return s + ")"
}

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

var installCommand = &cli.Command{
	Name:  "install",
	Usage: "put guard first in PATH: copy it to the shim folder, link every manifest tool to it, add the PATH block to the shell start-up files",
	UsageText: usage("guard install [--shim-dir D] [--no-rc] [--no-openclaw] [--force] [--bash-env] [--prewarm] [--system] [--source DIR | --release-url URL --release-sha256 HEX]",
		"guard install --bash-env && export PATH=\"$HOME/.shim:$PATH\""),
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "shim-dir", Usage: "where the shims go (made absolute and recorded in the manifest)", EnvVars: []string{"GUARD_SHIM_DIR"}},
		&cli.BoolFlag{Name: "no-rc", Usage: "leave the shell start-up files and guard's hook files alone"},
		&cli.BoolFlag{Name: "no-openclaw", Usage: "leave OpenClaw's config alone (by default install puts the shim folder first in its tools.exec.pathPrepend)"},
		&cli.BoolFlag{Name: "force", Usage: "replace files in the shim folder that are not guard's links"},
		&cli.BoolFlag{Name: "bash-env", Usage: "also reach non-interactive bash: login shells export BASH_ENV=~/.config/guard/env.sh"},
		&cli.BoolFlag{Name: "prewarm", Usage: "at shell start, heal in the background what the manifest keeps when something is missing"},
		&cli.BoolFlag{Name: "system", Usage: "for root sandboxes: the shims in /usr/local/lib/guard, links in /usr/local/bin, /etc/profile.d/guard.sh"},
		&cli.StringFlag{Name: "source", Usage: "guard's source folder, rebuilt at shell start if guard is evicted (install.sh passes it)"},
		&cli.StringFlag{Name: "release-url", Usage: "the release archive guard was installed from, fetched again at shell start if guard is evicted (install.sh passes it)"},
		&cli.StringFlag{Name: "release-sha256", Usage: "that archive's sha256, checked before it is unpacked"},
	},
	Action: withEngineAsIs(func(ctx *cli.Context, e *guard.Engine) error {
		return commands.Install(e, e.Config().Stdout, commands.InstallFlags{
			ShimDir: ctx.String("shim-dir"), Source: ctx.String("source"),
			ReleaseURL: ctx.String("release-url"), ReleaseSHA256: ctx.String("release-sha256"),
			NoRC: ctx.Bool("no-rc"), Force: ctx.Bool("force"),
			BashEnv: ctx.Bool("bash-env"), Prewarm: ctx.Bool("prewarm"), System: ctx.Bool("system"),
			NoOpenClaw: ctx.Bool("no-openclaw"),
		})
	}),
}

var uninstallCommand = &cli.Command{
	Name:      "uninstall",
	Usage:     "remove the shim links, guard's copy, the PATH blocks, the hook files and what --system added; models, cache, log and manifest stay",
	UsageText: usage("guard uninstall", "guard uninstall"),
	Action: withEngineAsIs(func(ctx *cli.Context, e *guard.Engine) error {
		return commands.Uninstall(e.Config(), e.Config().Stdout)
	}),
}

var statusCommand = &cli.Command{
	Name:      "status",
	Usage:     "show shims, real targets, builds, packages, models, auth, cache and the last heal events; exit 1 only when something that was here is broken or guard's setup is off (not fetched yet is exit 0)",
	UsageText: usage("guard status [--json] [--events N] [--since 1h]", "guard status --events 20 --since 2h"),
	Flags: []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in docs/status-json.md)"},
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
		if spec := ctx.String("job"); spec != "" {
			ok, err := e.RunJob(ctx.Context, spec, ctx.String("for"))
			switch {
			case err != nil:
				return cli.Exit(err.Error(), 1)
			case !ok:
				return cli.Exit("", 1) // the failure is in the job's record
			}
			return nil
		}
		if ctx.Bool("background") {
			return commands.HealBackground(e, ctx.Args().Slice(), ctx.Bool("prewarm"))
		}
		if ctx.Bool("wait") {
			followed, err := e.WaitHeals(ctx.Context, ctx.Args().Slice())
			if err != nil {
				// A signal, or a heal that is stopped or stuck (75): healing
				// in the foreground would wait on the same locks.
				if code := guard.ExitStatus(err); code > 128 || code == guard.StatusHealing {
					return cli.Exit(err.Error(), code)
				}
				e.Say("%v", err)
			}
			if ctx.NArg() == 0 {
				// With no name it waits and does nothing more: the heals
				// in progress, not a heal of everything in the manifest
				// (docs/healing-in-the-background.md).
				switch {
				case err != nil:
					return cli.Exit("", 1)
				case followed == 0:
					e.Say("no heal is running in the background; nothing to wait for")
				}
				return nil
			}
		}
		o := commands.HealOptions{Names: ctx.Args().Slice(), DryRun: ctx.Bool("dry-run"), JSON: ctx.Bool("json")}
		ok, err := commands.Heal(ctx.Context, e, e.Config().Stdout, o)
		if err != nil {
			return err
		}
		if !ok {
			return cli.Exit("some things could not be healed (see above)", 1)
		}
		return nil
	}),
}

// mendCommand is what the PATH block runs at shell start when the shim
// folder changed since guard last checked its links (install.LinksStamp):
// the repair every command makes, and nothing else. It prints nothing when
// the folder is whole again, and one line when it cannot work (a broken
// manifest's two, joined): every shell start says it until it is fixed.
var mendCommand = &cli.Command{
	Name:      "mend",
	Hidden:    true,
	Usage:     "bring back the shim links a sandbox evicted, silently (the PATH block runs it)",
	UsageText: usage("guard mend", "guard mend"),
	Action: func(ctx *cli.Context) error {
		e, err := engine(ctx, true)
		var coder cli.ExitCoder
		if errors.As(err, &coder) {
			return cli.Exit(strings.ReplaceAll(err.Error(), "\n", "; "), coder.ExitCode())
		}
		if err != nil {
			return err
		}
		e.Close()
		return nil
	},
}

var whichCommand = &cli.Command{
	Name:         "which",
	Usage:        "show what NAME runs: the real target, its binary and the libraries it loads, its build or package, its models; or a model file's state",
	UsageText:    usage("guard which NAME", "guard which llama-completion"),
	BashComplete: completeNames,
	Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
		if ctx.Args().Len() != 1 {
			return cli.Exit("which needs one tool or model name: guard which NAME", 2)
		}
		if !commands.Which(e, e.Config().Stdout, ctx.Args().First()) {
			return cli.Exit("", 1)
		}
		return nil
	}),
}

var execCommand = &cli.Command{
	Name:            "exec",
	Usage:           "run NAME exactly as its shim would",
	UsageText:       usage("guard exec NAME -- ARGS...", "guard exec npx -- cowsay hi"),
	SkipFlagParsing: true,
	BashComplete:    completeNames,
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
			UsageText: usage("guard cache stats [--json]", "guard cache stats"),
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in docs/status-json.md)"},
			},
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				return commands.CacheStats(e, e.Config().Stdout, ctx.Bool("json"))
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

var stashCommand = &cli.Command{
	Name:      "stash",
	Usage:     "list the stash of builds, or export it, signed, for other machines",
	UsageText: usage("guard stash list [--json] [oci://HOST/REPO] | guard stash export DIR | guard stash push [BUILD…] oci://HOST/REPO | guard stash keygen [NAME] | guard stash key BUILD", "guard stash push oci://ghcr.io/acme/guard-stash"),
	Subcommands: []*cli.Command{
		{
			Name:      "list",
			Usage:     "every entry (of the local stash, or of a registry), its size and whether it matches its recipe now",
			UsageText: usage("guard stash list [--json] [oci://HOST/REPO]", "guard stash list"),
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object (schema in docs/stash.md)"},
			},
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				switch ctx.NArg() {
				case 0:
					return commands.StashList(e, e.Config().Stdout, ctx.Bool("json"))
				case 1:
					return commands.StashListRemote(e, e.Config().Stdout, ctx.Args().First(), ctx.Bool("json"))
				}
				return cli.Exit("stash list takes at most one registry: guard stash list [oci://HOST/REPO]", 2)
			}),
		},
		{
			Name:      "export",
			Usage:     "copy every entry, checked and signed, into DIR with an index: a stash_from source",
			UsageText: usage("guard stash export DIR", "guard stash export /mnt/shared/guard-stash"),
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				if ctx.NArg() != 1 {
					return cli.Exit("stash export needs one folder: guard stash export DIR", 2)
				}
				return commands.StashExport(e, e.Config().Stdout, ctx.Args().First())
			}),
		},
		{
			Name:      "push",
			Usage:     "push the local entries (of the builds named, else all), signed, to a registry: a stash_from source",
			UsageText: usage("guard stash push [--entry KEY] [BUILD…] oci://HOST[:PORT]/REPO", "guard stash push llama-cpp oci://ghcr.io/acme/guard-stash"),
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "entry", Usage: "push only the entry of this key (with one BUILD), saying so on stderr: what stash_to runs"},
			},
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				args := ctx.Args().Slice()
				if len(args) == 0 || !strings.HasPrefix(args[len(args)-1], "oci://") {
					return cli.Exit("stash push needs a registry last: guard stash push [BUILD…] oci://HOST/REPO", 2)
				}
				out := e.Config().Stdout
				if ctx.String("entry") != "" {
					out = e.Config().Stderr // what stash_to runs: its stdout is /dev/null, its stderr the push log
				}
				return commands.StashPush(e, out, args[:len(args)-1], ctx.String("entry"), args[len(args)-1])
			}),
		},
		{
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
		},
		{
			Name:      "keygen",
			Usage:     "make the key pair that signs exported entries; prints the public key to trust",
			UsageText: usage("guard stash keygen [NAME]", "guard stash keygen fleet-1"),
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				if ctx.NArg() > 1 {
					return cli.Exit("stash keygen takes at most one name: guard stash keygen [NAME]", 2)
				}
				return commands.StashKeygen(e, e.Config().Stdout, ctx.Args().First())
			}),
		},
	},
}

var modelCommand = &cli.Command{
	Name:      "model",
	Usage:     "push a model to an OCI registry, where a fleet's manifests name it",
	UsageText: usage("guard model push FILE oci://HOST/REPO[:TAG]", "guard model push ~/models/qwen.gguf oci://ghcr.io/acme/models/qwen:q4"),
	Subcommands: []*cli.Command{
		{
			Name:      "push",
			Usage:     "push a GGUF file as one raw layer (its digest is its sha256) and print the manifest lines that name it",
			UsageText: usage("guard model push FILE oci://HOST/REPO[:TAG]", "guard model push ~/models/qwen.gguf oci://ghcr.io/acme/models/qwen:q4"),
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				if ctx.NArg() != 2 || !strings.HasPrefix(ctx.Args().Get(1), "oci://") {
					return cli.Exit("model push needs a file and a registry: guard model push FILE oci://HOST/REPO[:TAG]", 2)
				}
				return commands.ModelPush(e, e.Config().Stdout, ctx.Args().Get(0), ctx.Args().Get(1))
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
				file := ctx.Args().First()
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
			},
		},
		{
			Name:      "show",
			Usage:     "print the manifest in use as written (the user's file with its comments, else the embedded default); --json: the effective one",
			UsageText: usage("guard manifest show [--json]", "guard manifest show > my-manifest.toml"),
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: "the effective manifest (defaults applied, paths expanded) as one JSON object"},
			},
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				return commands.ManifestShow(e, e.Config().Stdout, ctx.Bool("json"))
			}),
		},
		{
			Name:      "pin",
			Usage:     "hash every model that passes size and header and write its sha256 into the user manifest; a pinned model is verified, never re-pinned",
			UsageText: usage("guard manifest pin [--force] [--remote]", "guard heal && guard manifest pin"),
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "force", Usage: "pin each file as it is, even over a pin it does not match"},
				&cli.BoolFlag{Name: "remote", Usage: "take each sha256 from what the model's urls declare (Hugging Face's X-Linked-Etag), downloading nothing"},
			},
			Action: withEngine(func(ctx *cli.Context, e *guard.Engine) error {
				err := commands.Pin(ctx.Context, e, e.Config().Stdout, ctx.Bool("force"), ctx.Bool("remote"))
				if errors.As(err, new(*commands.UnpinnedError)) {
					return cli.Exit(err.Error(), 1) // a model to fix, not guard's own failure
				}
				return err
			}),
		},
	},
}

var completionCommand = &cli.Command{
	Name:      "completion",
	Usage:     "print the shell completion script (bash, zsh or fish); it completes commands, flags, and tool and model names",
	UsageText: usage("guard completion bash|zsh|fish", "source <(guard completion bash)"),
	Action: func(ctx *cli.Context) error {
		switch ctx.Args().First() {
		case "", "bash":
			fmt.Fprint(ctx.App.Writer, bashCompletion)
		case "zsh":
			fmt.Fprint(ctx.App.Writer, zshCompletion)
		case "fish":
			fmt.Fprint(ctx.App.Writer, fishCompletion)
		default:
			return cli.Exit(fmt.Sprintf("no completion for %q: use bash, zsh or fish", ctx.Args().First()), 2)
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
