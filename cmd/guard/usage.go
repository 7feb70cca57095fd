package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

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
