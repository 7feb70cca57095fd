package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/sandbox-guard/guard/guard"
)

// These are urfave/cli v2's own completion scripts (autocomplete/bash_autocomplete
// and zsh_autocomplete), which ask the binary itself for candidates through
// --generate-bash-completion.
const bashCompletion = `_guard_bash_autocomplete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts base
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if [[ "$cur" == "-"* ]]; then
      opts=$( ${COMP_WORDS[@]:0:$COMP_CWORD} ${cur} --generate-bash-completion )
    else
      opts=$( ${COMP_WORDS[@]:0:$COMP_CWORD} --generate-bash-completion )
    fi
    COMPREPLY=( $(compgen -W "${opts}" -- ${cur}) )
    return 0
  fi
}
complete -o bashdefault -o default -o nospace -F _guard_bash_autocomplete guard
`

const zshCompletion = `#compdef guard
_guard() {
  local -a opts
  local cur
  cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _guard guard
`

// fishCompletion asks guard itself for candidates the same way: the words
// before the cursor, then --generate-bash-completion (after the current
// word when it starts a flag); fish filters them by what is typed.
const fishCompletion = `function __guard_complete
    set -l words (commandline -opc)
    set -l cur (commandline -ct)
    if string match -q -- '-*' $cur
        $words $cur --generate-bash-completion 2>/dev/null
    else
        $words --generate-bash-completion 2>/dev/null
    end
end
complete -c guard -f -a '(__guard_complete)'
`

// completeNames completes what heal, which and exec take: after a word
// starting with "-" the command's flags, else the manifest's tool names
// (and, but for exec, its model files). A manifest that does not load
// completes nothing.
func completeNames(ctx *cli.Context) {
	if args := argsOf(ctx); len(args) > 2 && strings.HasPrefix(args[len(args)-2], "-") {
		cli.DefaultCompleteWithFlags(ctx.Command)(ctx)
		return
	}
	c, err := guard.LoadConfig(worldOf(ctx))
	if err != nil {
		return
	}
	names := slices.Sorted(maps.Keys(c.M.Tools))
	if ctx.Command.Name != "exec" {
		for _, m := range c.M.Models {
			names = append(names, m.File)
		}
	}
	for _, n := range names {
		if !strings.ContainsAny(n, " \t\n") { // one candidate a line, as the scripts read them
			fmt.Fprintln(ctx.App.Writer, n)
		}
	}
}

func newCompletionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script (bash, zsh or fish); it completes commands, flags, and tool and model names",
		UsageText: usage("guard completion bash|zsh|fish", "source <(guard completion bash)"),
		Action: func(ctx *cli.Context) error {
			return runCompletion(ctx.App.Writer, ctx.Args().First())
		},
	}
}

// runCompletion prints shell's script (bash when none is named).
func runCompletion(out io.Writer, shell string) error {
	switch shell {
	case "", "bash":
		fmt.Fprint(out, bashCompletion)
	case "zsh":
		fmt.Fprint(out, zshCompletion)
	case "fish":
		fmt.Fprint(out, fishCompletion)
	default:
		return cli.Exit(fmt.Sprintf("no completion for %q: use bash, zsh or fish", shell), 2)
	}
	return nil
}
