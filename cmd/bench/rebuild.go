package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
)

// rebuildGoal: a rebuild through guard within 1.2x the bare build.
const rebuildGoal = 1.2

// fixtureSteps build testdata/cmake-fixture (the CMake project standing in
// for llama.cpp); both rows run exactly these.
var fixtureSteps = [][]string{
	{"cmake", "-B", "build", "-DCMAKE_BUILD_TYPE=Release"},
	{"cmake", "--build", "build", "-j2"},
}

// rebuildTable times a cold rebuild of the fixture (its build folder
// evicted before every sample) by the bare cmake steps and through guard
// heal, which adds guard's start-up, the build lock, the build log, the
// interrupted-build marker and the health check of the result.
func rebuildTable() *Table {
	var script []string
	for _, step := range fixtureSteps {
		script = append(script, builds.QuoteArgv(step))
	}
	return &Table{
		Name:    "rebuild",
		Title:   fmt.Sprintf("Rebuild of the CMake fixture through guard against bare cmake (goal: within %.1fx)", rebuildGoal),
		Anchors: []string{"bare-cmake"},
		Knobs:   Knobs{Runs: 3, Rounds: 3, Warmup: 0, Stat: "median"},
		Timeout: 10 * time.Minute,
		Setup:   rebuildSetup,
		Rows: []Row{
			{
				Name:   "bare-cmake",
				Setup:  bareEnv,
				Before: evictBuild,
				Argv:   []string{"sh", "-c", strings.Join(script, " && ")},
				Dir:    "$HOME/llama.cpp",
			},
			{
				Name:   "guard",
				Setup:  guardInstalled,
				Before: evictBuild,
				Argv:   []string{"$SHIM_DIR/guard", "heal", "llama-completion"},
				Goal:   &Goal{Anchor: "bare-cmake", Max: rebuildGoal},
			},
		},
	}
}

func rebuildSetup(s *Sandbox) error {
	for _, cmd := range []string{"cmake", "cc", "make"} {
		if _, err := s.LookPath(cmd); err != nil {
			return err
		}
	}
	src := filepath.Join(s.Vars["REPO"], "testdata", "cmake-fixture")
	if err := os.CopyFS(s.Expand("$HOME/llama.cpp"), os.DirFS(src)); err != nil {
		return fmt.Errorf("copy the fixture: %w", err)
	}
	var steps []string
	for _, step := range fixtureSteps {
		var q []string
		for _, a := range step {
			q = append(q, strconv.Quote(a))
		}
		steps = append(steps, "  ["+strings.Join(q, ", ")+"],")
	}
	return s.WriteFile("$GUARD_MANIFEST", `[packages]
cmake = "cmake"

[builds.llama-cpp]
dir = "~/llama.cpp"
needs = ["cmake"]
steps = [
`+strings.Join(steps, "\n")+`
]

[tools.llama-completion]
path = "~/llama.cpp/build/bin/llama-completion"
build = "llama-cpp"
`, 0o644)
}

// bareEnv gives the bare build what guard's builder gives its steps: ccache
// as the compilers' launcher when it is installed, so it helps both rows
// or neither.
func bareEnv(s *Sandbox, r *Row) error {
	if _, err := s.LookPath("ccache"); err == nil {
		r.Env = append(r.Env, "CMAKE_C_COMPILER_LAUNCHER=ccache", "CMAKE_CXX_COMPILER_LAUNCHER=ccache")
	}
	return nil
}

func evictBuild(s *Sandbox) error { return os.RemoveAll(s.Expand("$HOME/llama.cpp/build")) }
