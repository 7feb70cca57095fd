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
// interrupted-build marker, the health check of the result and the save to
// the stash (emptied before each sample, so that the row builds), and
// side by side guard heal restoring the same eviction from the stash, and
// a call of the tool doing the same.
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
				Before: evictBuildAndStash,
				Argv:   []string{"$SHIM_DIR/guard", "heal", "llama-completion"},
				Goal:   &Goal{Anchor: "bare-cmake", Max: rebuildGoal},
			},
			{
				Name:   "guard-stash-restore",
				Setup:  guardInstalled,
				Before: stashedThenEvicted,
				Argv:   []string{"$SHIM_DIR/guard", "heal", "llama-completion"},
			},
			{
				// The call itself after the eviction: it restores in its
				// own process (docs/stash.md), then runs the tool.
				Name:   "call-stash-restore",
				Setup:  guardInstalled,
				Before: stashedThenEvicted,
				Argv:   []string{"$SHIM_DIR/llama-completion", "hello"},
			},
		},
		Note: stashNote,
	}
}

// stashedThenEvicted makes sure the stash holds the fixture's build (one
// untimed guard heal after the guard row emptied it), then evicts the
// build folder.
func stashedThenEvicted(s *Sandbox) error {
	if _, err := os.Stat(s.Expand("$STATE_DIR/stash/index")); err != nil {
		if err := evictBuild(s); err != nil {
			return err
		}
		if _, err := s.Run(s.Expand("$SHIM_DIR/guard"), "heal", "llama-completion"); err != nil {
			return err
		}
	}
	return evictBuild(s)
}

// stashNote is the size of the entry the restore row restored, against
// what it unpacks to.
func stashNote(s *Sandbox) (string, error) {
	if err := stashedThenEvicted(s); err != nil {
		return "", err
	}
	if _, err := s.Run(s.Expand("$SHIM_DIR/guard"), "heal", "llama-completion"); err != nil {
		return "", err
	}
	entries, _ := filepath.Glob(s.Expand("$STATE_DIR/stash/*.gst"))
	var entry, unpacked int64
	for _, e := range entries {
		if fi, err := os.Stat(e); err == nil {
			entry += fi.Size()
		}
	}
	bin, _ := os.ReadDir(s.Expand("$HOME/llama.cpp/build/bin"))
	for _, d := range bin {
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			unpacked += fi.Size()
		}
	}
	return fmt.Sprintf("the stash entry restored: %d bytes (zstd) for the %d bytes of build/bin", entry, unpacked), nil
}

// evictBuildAndStash is the guard row's Before: a cold build, not a restore.
func evictBuildAndStash(s *Sandbox) error {
	if err := os.RemoveAll(s.Expand("$STATE_DIR/stash")); err != nil {
		return err
	}
	return evictBuild(s)
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
