package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-guard/guard/guard/builds"
)

// Goals of the start-up table (issue "Benchmark"), as ratios to the zap
// floor: what guard costs beyond the libraries it links.
const (
	execGoal       = 1.10
	supervisedGoal = 1.25
)

// shimTable times what a call through guard costs before the real tool
// starts, side by side with the cheapest ways to put a program in front of
// another and with other shim managers; then what guard's healthy paths
// cost as the manifest, the prompt cache and the heal log grow (sc). Every
// real tool is one file (a copy of /bin/true, hard-linked under each
// tool's name), so every row runs the same program and the differences
// are the shims alone.
func shimTable(sc Scale) *Table {
	rows := []Row{
		{Name: "direct", Argv: []string{"$TOOLS/true"}},
		{Name: "bash-shim", Setup: bashShim, Argv: []string{"$TMP/bash-shim"}},
		{Name: "minimal-go", Setup: build("./cmd/bench/floor/minimal"), Argv: []string{"$BUILT/minimal"}},
		{Name: "zap-floor", Setup: build("./cmd/bench/floor/zap"), Argv: []string{"$BUILT/zap"}},
		// The zap floor plus urfave/cli, creack/pty and gofrs/flock: what
		// the product owner's other libraries cost before main.
		{Name: "deps-floor", Setup: build("./cmd/bench/floor/deps"), Argv: []string{"$BUILT/deps"}},
		// The deps floor plus every other library guard links: what guard
		// pays before main, none of its own code.
		{Name: "libs-floor", Setup: build("./cmd/bench/floor/libs"), Argv: []string{"$BUILT/libs"}},
		// The zap floor starting the tool as a child and waiting for it:
		// what any supervising Go shim pays.
		{Name: "supervise-floor", Setup: build("./cmd/bench/floor/supervise"), Argv: []string{"$BUILT/supervise"}},
		// A manifest tool with no policy: guard's pure exec path.
		{Name: "guard-plain", Setup: probe("plain"), Argv: []string{"$SHIM_DIR/plain"}},
		// The default npx policy (--yes inserted, prompts answered).
		{Name: "guard-npx", Setup: probe("npx"), Argv: []string{"$SHIM_DIR/npx"}},
		// A tool with a timeout: guard's supervised path.
		{Name: "guard-slowtool", Setup: probe("slowtool"), Argv: []string{"$SHIM_DIR/slowtool"}},
		// The llama shim answers a repeated call from the prompt cache
		// without starting the tool.
		{
			Name:  "guard-cache-hit",
			Setup: cacheHit,
			Argv:  []string{"$SHIM_DIR/llama-completion", "-m", "$HOME/m.gguf", "-p", "hi", "-n", "4"},
			Goal:  floorGoal("cache hit", supervisedGoal),
		},
	}
	rows = append(rows, managerRows()...)
	rows = append(rows, scaleRows(sc)...)
	return &Table{
		Name: "shim",
		Title: "Shim start-up: guard against a direct exec, floor shims and other managers' shims, and as the manifest, the prompt cache and the heal log grow " +
			"(goals: exec path <= 1.1x, supervised and cache hit <= 1.25x the zap floor; 10,000 tools <= 1.15x one, guard status on a 100 MB log <= 1.5x a 1 KB one and under 50 MB, every other scaling row <= 1.1x its smallest case)",
		Anchors: []string{"direct", "zap-floor", "deps-floor", "libs-floor"},
		Env:     []string{"SHIM_TARGET=$TOOLS/true"}, // the floors' target, resolved once so they time no PATH search
		Knobs:   Knobs{Runs: 300, Rounds: 30, Warmup: 1, Stat: "median"},
		Setup:   shimSetup,
		Rows:    rows,
	}
}

// floorGoal is a goal against the zap floor, named after guard's path.
func floorGoal(path string, max float64) *Goal {
	return &Goal{Anchor: "zap-floor", Max: max, What: fmt.Sprintf("%s <= %.2fx zap-floor", path, max)}
}

// shimTools are the manifest tools the guard rows call; each is a hard
// link to $TOOLS/true.
var shimTools = []string{"plain", "npx", "slowtool"}

func shimSetup(s *Sandbox) error {
	tools := s.Vars["TOOLS"]
	if err := copyFile("/bin/true", filepath.Join(tools, "true"), 0o755); err != nil {
		return err
	}
	for _, t := range shimTools {
		if err := os.Link(filepath.Join(tools, "true"), filepath.Join(tools, t)); err != nil {
			return err
		}
	}
	def, err := os.ReadFile(filepath.Join(s.Vars["REPO"], "manifest", "default.toml"))
	if err != nil {
		return err
	}
	return s.WriteFile("$GUARD_MANIFEST", string(def)+"\n[tools.slowtool]\ntimeout = \"60s\"\n\n[tools.plain]\n", 0o644)
}

func bashShim(s *Sandbox, _ *Row) error {
	if _, err := os.Stat("/bin/bash"); err != nil {
		return err
	}
	return s.WriteFile("$TMP/bash-shim", "#!/bin/bash\nexec "+shellQuote(s.Expand("$TOOLS/true"))+" \"$@\"\n", 0o755)
}

// probe is the Setup of a guard shim row: it finds which path guard takes for
// tool, and sets the goal of that path. For one call the real tool is a
// script that writes its parent's pid: when guard execs the tool, the
// parent is this harness; when it supervises, it is guard.
func probe(tool string) func(*Sandbox, *Row) error {
	return func(s *Sandbox, r *Row) (err error) {
		if err := s.Guard(); err != nil {
			return err
		}
		real := filepath.Join(s.Vars["TOOLS"], tool)
		out := filepath.Join(s.Dir, tool+".ppid")
		if err := os.Remove(real); err != nil {
			return err
		}
		defer func() {
			// Back to the one shared file, whatever happened.
			os.Remove(real)
			if lerr := os.Link(filepath.Join(s.Vars["TOOLS"], "true"), real); lerr != nil && err == nil {
				err = lerr
			}
		}()
		if err := s.WriteFile(real, "#!/bin/sh\necho \"$PPID\" >"+shellQuote(out)+"\n", 0o755); err != nil {
			return err
		}
		cmd, err := s.Command("$SHIM_DIR/" + tool)
		if err != nil {
			return err
		}
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("guard's %s path fails: %w\n%s", tool, err, indent(string(o)))
		}
		data, err := os.ReadFile(out)
		if err != nil {
			return fmt.Errorf("guard did not run the %s probe: %w", tool, err)
		}
		switch ppid, _ := strconv.Atoi(strings.TrimSpace(string(data))); ppid {
		case os.Getpid():
			r.Goal = floorGoal("exec", execGoal)
		case cmd.Process.Pid:
			r.Goal = floorGoal("supervised", supervisedGoal)
		default:
			return fmt.Errorf("the %s probe's parent was %q, neither the harness nor guard", tool, data)
		}
		return nil
	}
}

// cacheHit sets up a llama call whose answer is in the prompt cache: the
// first call below runs the tool and stores it.
func cacheHit(s *Sandbox, r *Row) error {
	if err := s.Guard(); err != nil {
		return err
	}
	if err := s.WriteFile("$HOME/llama.cpp/build/bin/llama-completion", "#!/bin/sh\nprintf 'a cached answer\\n\\n'\n", 0o755); err != nil {
		return err
	}
	if err := s.WriteFile("$HOME/m.gguf", "GGUF\x03\x00\x00\x00", 0o644); err != nil {
		return err
	}
	out, err := s.Run(r.Argv...)
	if err != nil {
		return fmt.Errorf("guard's llama path fails: %w", err)
	}
	if !strings.Contains(out, "a cached answer") {
		return fmt.Errorf("guard's llama path did not answer:\n%s", indent(out))
	}
	return nil
}

// shellQuote quotes s for sh where it needs it.
func shellQuote(s string) string { return builds.QuoteArgv([]string{s}) }

// baselineRows time another guard build (-baseline FILE: today's main, say)
// and this one on the exec and the supervised path, each in a world of its
// own made the same way (same manifest, environment and warm-up), in the
// same rounds: a change to either path shows as the ratio between
// after-* and before-*.
func baselineRows(file string, logBytes int64) []Row {
	var rows []Row
	for _, tool := range []string{"plain", "slowtool"} {
		rows = append(rows,
			Row{Name: "before-" + tool, Setup: guardWorld("before", file, tool)},
			Row{Name: "after-" + tool, Setup: guardWorld("after", "", tool)})
	}
	// guard status on a shared log of another install's events alone.
	name := "status-foreign-log-" + sizeName(logBytes)
	rows = append(rows,
		Row{Name: "before-" + name, Setup: foreignLogWorld(logBytes, "before", file)},
		Row{Name: "after-" + name, Setup: foreignLogWorld(logBytes, "after", "")})
	return rows
}

// guardWorld installs file (this run's build when "") as guard in the
// world name, with the shim table's manifest, and points the row at
// tool's link there.
func guardWorld(name, file, tool string) func(*Sandbox, *Row) error {
	return func(s *Sandbox, r *Row) error {
		dir := filepath.Join(s.Dir, name)
		shim := filepath.Join(dir, "shim")
		env := []string{
			"GUARD_MANIFEST=" + filepath.Join(dir, "manifest.toml"),
			"GUARD_STATE_DIR=" + filepath.Join(dir, "state"),
			"GUARD_SHIM_DIR=" + shim,
			"GUARD_LOG=" + filepath.Join(dir, "selfheal.log"),
			"PATH=" + shim + ":$TOOLS:/usr/local/bin:/usr/bin:/bin",
		}
		err := s.Once("world "+name, func() error {
			if file == "" {
				built, err := s.Build("./cmd/guard")
				if err != nil {
					return err
				}
				file = built
			}
			text, err := os.ReadFile(s.Vars["GUARD_MANIFEST"])
			if err != nil {
				return err
			}
			if err := s.WriteFile(filepath.Join(dir, "manifest.toml"), string(text), 0o644); err != nil {
				return err
			}
			if err := os.MkdirAll(shim, 0o755); err != nil {
				return err
			}
			// A copy for both: a hard link to the one build would time a
			// file in another place of the page cache than the baseline's.
			if err := copyFile(file, filepath.Join(shim, "guard"), 0o755); err != nil {
				return err
			}
			if _, err := s.RunEnv(env, filepath.Join(shim, "guard"), "install", "--no-rc"); err != nil {
				return err
			}
			for _, t := range shimTools {
				if _, err := s.RunEnv(env, filepath.Join(shim, t)); err != nil {
					return err
				}
			}
			return nil
		})
		r.Env, r.Argv = env, []string{filepath.Join(shim, tool)}
		return err
	}
}
