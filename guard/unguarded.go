package guard

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/manifest"
	"github.com/sandbox-guard/guard/shims"
)

// execFunc becomes the tool: runner.Exec, or a test's recorder.
type execFunc func(path string, argv, env []string) error

// unguarded runs the shim name when guard itself cannot work (why: no HOME,
// a manifest it cannot read), as "When guard cannot work" in
// docs/exit-status-and-events.md says: a shim must never be the reason a call fails. It warns once with
// the cause and the fix, finds the real tool the safe way (the embedded
// default's path for name, else PATH without the shim folder and never
// guard itself, by device and inode), and becomes it with the embedded
// default's forced flags and environment for that name. The loop guard
// still holds. Only this path parses the embedded default; a healthy call
// never comes here.
func unguarded(w World, name string, args []string, why error, exec execFunc) int {
	home := w.Getenv("HOME")
	depth, _ := parseDepth(w.Getenv(depthVar))
	if depth >= maxDepth {
		Tell(w.Stderr, fmt.Sprintf("%s: %v\nrefused: the call went through shims %d times in a row (%s); a PATH that loops through two shim folders?", name, why, depth, depthVar))
		return ExitStatus(&guardError{err: why})
	}
	cause, fix := failure(why)
	Tell(w.Stderr, cause+"; running "+name+" unguarded\n"+fix)

	tool := &manifest.Tool{Name: name}
	if m, err := manifest.Parse(manifest.EmbeddedSource, manifest.DefaultTOML(), home); err == nil && m.Tool(name) != nil {
		tool = m.Tool(name)
	}
	self, haveSelf := resolve.IDOf(w.Self)
	q := resolve.Query{
		Name:     name,
		PathEnv:  w.Getenv("PATH"),
		ShimDir:  manifest.ExpandHome(cmp.Or(w.Getenv("GUARD_SHIM_DIR"), manifest.DefaultShimDir), home),
		Self:     self,
		HaveSelf: haveSelf,
	}
	real, err := resolve.Real(q)
	if tool.Path != "" {
		// The default's own place for it (~/llama.cpp/...) comes first.
		withPath := q
		withPath.Path = tool.Path
		if p, perr := resolve.Real(withPath); perr == nil {
			real, err = p, nil
		}
	}
	if err != nil {
		Tell(w.Stderr, name+": "+err.Error())
		return ExitStatus(&healError{err})
	}
	argv := append([]string{real}, shims.Forced(name, args, tool.Args, w.StdinTTY)...)
	if err := exec(real, argv, toolEnv(w.Env, tool, depth)); err != nil {
		Tell(w.Stderr, name+": "+err.Error())
		return ExitStatus(&execError{err})
	}
	return 0 // only a test's exec returns without error
}

// failure splits why guard cannot work into one line of cause and the fix:
// a manifest's first mistake (the others are counted; guard manifest check
// lists them all) and the hint of a *guardError.
func failure(why error) (cause, fix string) {
	fix = "run guard status"
	var ge *guardError
	if errors.As(why, &ge) {
		why = ge.err
		fix = cmp.Or(ge.hint, fix)
	}
	lines := strings.Split(why.Error(), "\n")
	cause = lines[0]
	if len(lines) > 1 {
		cause += fmt.Sprintf(" (and %d more)", len(lines)-1)
	}
	return cause, fix
}
