package manifest

import (
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// A build step may hold two placeholders, so that one recipe builds what
// the manifest's tools need with the machine it runs on (docs/manifest.md):
//
//   - "{targets}", a whole argument, becomes one argument per target of
//     the recipe (Build.Targets: by default the file names of the paths of
//     the tools whose build is this recipe);
//   - "{jobs}", anywhere in an argument, becomes the number of CPUs this
//     process may run on.
const (
	TargetsPlaceholder = "{targets}"
	JobsPlaceholder    = "{jobs}"
)

// ExpandedSteps returns the recipe's steps as they run, placeholders
// replaced: the one reading of them for the builder, its log, `guard heal
// --dry-run`, `guard which` and whatever keys on what a build ran. {jobs}
// is runtime.NumCPU, which honours the CPU affinity mask (taskset, a
// container's cpuset).
func (b *Build) ExpandedSteps() [][]string {
	return expandSteps(b.Steps, b.Targets, strconv.Itoa(runtime.NumCPU()))
}

// ResultSteps are the steps with {targets} expanded and {jobs} left as
// written: what decides what a build makes (the job count does not), so
// that a stash entry made on an 8-CPU machine matches on a 2-CPU one.
func (b *Build) ResultSteps() [][]string {
	return expandSteps(b.Steps, b.Targets, JobsPlaceholder)
}

func expandSteps(steps [][]string, targets []string, jobs string) [][]string {
	out := make([][]string, len(steps))
	for i, step := range steps {
		s := make([]string, 0, len(step))
		for _, arg := range step {
			if arg == TargetsPlaceholder {
				s = append(s, targets...)
				continue
			}
			s = append(s, strings.ReplaceAll(arg, JobsPlaceholder, jobs))
		}
		out[i] = s
	}
	return out
}

// fillTargets gives each recipe without a targets key the file names of
// its tools' paths (ToolFiles).
func (m *Manifest) fillTargets() {
	for name, files := range m.toolFiles() {
		if b := m.Builds[name]; b != nil && b.Targets == nil {
			b.Targets = files
		}
	}
}

// ToolFiles are the file names of the paths of the tools recipe builds,
// sorted and each once: a recipe's default targets, and the names its
// prebuilt's archive is searched for.
func (m *Manifest) ToolFiles(recipe string) []string { return m.toolFiles()[recipe] }

// toolFiles is ToolFiles of every recipe, in one pass over the tools (a
// manifest is parsed on every call, and may name thousands).
func (m *Manifest) toolFiles() map[string][]string {
	by := map[string][]string{}
	for _, t := range m.Tools {
		if t != nil && t.Build != "" && t.Path != "" {
			by[t.Build] = append(by[t.Build], filepath.Base(t.Path))
		}
	}
	for recipe, files := range by {
		slices.Sort(files)
		by[recipe] = slices.Compact(files)
	}
	return by
}

// placeholderError says what is wrong with the placeholders in one step
// argument of a recipe with targets, or "".
func placeholderError(arg string, targets []string, recipe string) string {
	switch {
	case arg == TargetsPlaceholder && len(targets) == 0:
		return "{targets} names no target: list them in targets, or give a tool with build = " + strconv.Quote(recipe) + " a path"
	case arg != TargetsPlaceholder && strings.Contains(arg, TargetsPlaceholder):
		return "{targets} must be a whole argument: it becomes one argument per target"
	}
	for rest := arg; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return ""
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return ""
		}
		word := rest[i+1 : i+j]
		// Only a near miss of a placeholder is a mistake: ${VAR} is the
		// shell's or CMake's, {a,b} a shell's brace list, and awk's or
		// sed's {print} and {p} are the program's own text.
		if (i == 0 || rest[i-1] != '$') && nearMiss(word, "targets", "jobs") {
			return "unknown placeholder {" + word + "}: a step knows {targets} and {jobs}"
		}
		rest = rest[i+j+1:]
	}
}

// nearMiss reports whether word is within two edits of one of names
// without being it: {target} and {job} are typos, {print} is not.
func nearMiss(word string, names ...string) bool {
	for _, n := range names {
		if word != n && editDistance(word, n) <= 2 {
			return true
		}
	}
	return false
}
