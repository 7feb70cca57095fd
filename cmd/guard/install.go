package main

import (
	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/commands"
)

func newInstallCommand() *cli.Command {
	return &cli.Command{
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
			return installNow(e, commands.InstallFlags{
				ShimDir: ctx.String("shim-dir"), Source: ctx.String("source"),
				ReleaseURL: ctx.String("release-url"), ReleaseSHA256: ctx.String("release-sha256"),
				NoRC: ctx.Bool("no-rc"), Force: ctx.Bool("force"),
				BashEnv: ctx.Bool("bash-env"), Prewarm: ctx.Bool("prewarm"), System: ctx.Bool("system"),
				NoOpenClaw: ctx.Bool("no-openclaw"),
			})
		}),
	}
}

// installNow installs without mending the shim folder first: install
// manages the folder itself.
func installNow(e *guard.Engine, o commands.InstallFlags) error {
	return commands.Install(e, e.Config().Stdout, o)
}
