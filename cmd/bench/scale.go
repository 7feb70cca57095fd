package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
)

// Scale is what the scaling rows of the start-up table compare (issue 14:
// a healthy call costs the same whatever else guard holds). The first size
// of each list is the row the others are compared to.
type Scale struct {
	Tools    []int   // tools in the manifest; an exec-path call of one of them
	Models   []int   // models in the manifest; a llama call answered from the prompt cache
	Entries  []int   // prompt-cache entries besides the one a call hits
	LogBytes []int64 // heal log size (with a full .1 beside the larger ones); a call, and guard status
}

// FullScale is what `go run ./cmd/bench shim` measures.
var FullScale = Scale{
	Tools:    []int{1, 100, 1000, 10000},
	Models:   []int{1, 50},
	Entries:  []int{0, 10000},
	LogBytes: []int64{1 << 10, 100 << 20},
}

// Goals of the scaling rows against their smallest case (issue 14's "Done
// when"): the largest manifest within 1.15x, every other scaling row
// within 1.1x, guard status on the largest log within 1.5x and under
// 50 MB.
const (
	scaleGoal      = 1.10
	mostToolsGoal  = 1.15
	statusLogGoal  = 1.5
	statusLogBytes = 50 << 20
)

// scaleRows are the rows of sc. Each row has a guard world of its own (a
// manifest, a state folder, a shim folder holding a hard link to the one
// guard build), so the sizes never mix.
func scaleRows(sc Scale) []Row {
	var rows []Row
	for i, n := range sc.Tools {
		r := Row{Name: fmt.Sprintf("tools-%d", n), Setup: toolsWorld(n, "")}
		if i > 0 {
			max := scaleGoal
			if i == len(sc.Tools)-1 {
				max = mostToolsGoal
			}
			r.Goal = &Goal{Anchor: fmt.Sprintf("tools-%d", sc.Tools[0]), Max: max}
		}
		rows = append(rows, r)
	}
	for i, n := range sc.Models {
		r := Row{Name: fmt.Sprintf("models-%d", n), Setup: cacheWorld(n, 0)}
		if i > 0 {
			r.Goal = &Goal{Anchor: fmt.Sprintf("models-%d", sc.Models[0]), Max: scaleGoal}
		}
		rows = append(rows, r)
	}
	for i, n := range sc.Entries {
		r := Row{Name: fmt.Sprintf("cache-%d", n), Setup: cacheWorld(1, n)}
		if i > 0 {
			r.Goal = &Goal{Anchor: fmt.Sprintf("cache-%d", sc.Entries[0]), Max: scaleGoal}
		}
		rows = append(rows, r)
	}
	for _, status := range []bool{false, true} {
		for i, size := range sc.LogBytes {
			name := "log-" + sizeName(size)
			if status {
				name = "status-" + name
			}
			r := Row{Name: name, Setup: logWorld(size, status)}
			switch {
			case i == 0:
			case status:
				r.Goal = &Goal{Anchor: "status-log-" + sizeName(sc.LogBytes[0]), Max: statusLogGoal, MaxRSS: statusLogBytes}
			default:
				r.Goal = &Goal{Anchor: "log-" + sizeName(sc.LogBytes[0]), Max: scaleGoal}
			}
			rows = append(rows, r)
		}
	}
	// guard status on the largest log when none of it is this install's
	// (a shared /tmp/selfheal.log): it costs what the bounded read of the
	// log's end costs, however little of the log is this install's.
	if n := len(sc.LogBytes); n > 1 {
		size := sc.LogBytes[n-1]
		rows = append(rows, Row{
			Name:  "status-foreign-log-" + sizeName(size),
			Setup: foreignLogWorld(size, "", ""),
			Goal:  &Goal{Anchor: "status-log-" + sizeName(sc.LogBytes[0]), Max: statusLogGoal, MaxRSS: statusLogBytes},
		})
	}
	return rows
}

// foreignInstall marks the events of a log that are not the world's.
const foreignInstall = "/elsewhere/.cache/guard"

// foreignLogWorld is guard status in the tools-1 world (or, with world
// "before" or "after", in that world of -baseline, guard file there, this
// run's build when "") on a heal log of size bytes (and a full .1) of
// another install's events alone.
func foreignLogWorld(size int64, world, file string) func(*Sandbox, *Row) error {
	return func(s *Sandbox, r *Row) error {
		log := filepath.Join(s.Dir, "logs", "foreign-"+sizeName(size)+".log")
		if err := s.Once("log "+log, func() error { return writeHealLog(log, size, foreignInstall) }); err != nil {
			return err
		}
		var err error
		if world == "" {
			err = toolsWorld(1, log)(s, r)
		} else {
			err = guardWorld(world, file, "plain")(s, r)
			r.Env = append(r.Env, "GUARD_LOG="+log)
		}
		if err != nil {
			return err
		}
		r.Argv = []string{filepath.Join(filepath.Dir(r.Argv[0]), "guard"), "status"}
		_, err = s.RunEnv(r.Env, r.Argv...)
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			r.Status = exit.ExitCode()
		case err != nil:
			return err
		}
		return nil
	}
}

// sizeName is 1KB, 100MB.
func sizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// world makes (once a table) the guard world named name below $TMP/scale:
// manifest (written by write, given the world's folder), guard's copy
// hard-linked from the one build, guard install --no-rc, then warm, the
// call that leaves guard's own files as a healthy call finds them. It
// returns the world's folder and its environment.
func world(s *Sandbox, name string, write func(dir string) (string, error), warm []string) (string, []string, error) {
	dir := filepath.Join(s.Dir, "scale", name)
	env := []string{
		"GUARD_MANIFEST=" + filepath.Join(dir, "manifest.toml"),
		"GUARD_STATE_DIR=" + filepath.Join(dir, "state"),
		"GUARD_SHIM_DIR=" + filepath.Join(dir, "shim"),
		"GUARD_LOG=" + filepath.Join(dir, "selfheal.log"),
		"PATH=" + filepath.Join(dir, "shim") + ":$TOOLS:/usr/local/bin:/usr/bin:/bin",
	}
	err := s.Once("world "+name, func() error {
		built, err := s.Build("./cmd/guard")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, "shim"), 0o755); err != nil {
			return err
		}
		text, err := write(dir)
		if err != nil {
			return err
		}
		if err := s.WriteFile(filepath.Join(dir, "manifest.toml"), text, 0o644); err != nil {
			return err
		}
		guard := filepath.Join(dir, "shim", "guard")
		if err := os.Link(built, guard); err != nil {
			return err
		}
		if _, err := s.RunEnv(env, guard, "install", "--no-rc"); err != nil {
			return err
		}
		for range 2 {
			if _, err := s.RunEnv(env, append([]string{filepath.Join(dir, "shim", warm[0])}, warm[1:]...)...); err != nil {
				return err
			}
		}
		return nil
	})
	return dir, env, err
}

// toolsWorld is a row calling t0 of a manifest of n tools (each a plain
// tool: guard's exec path), with the heal log at log when it is set.
func toolsWorld(n int, log string) func(*Sandbox, *Row) error {
	return func(s *Sandbox, r *Row) error {
		dir, env, err := world(s, fmt.Sprintf("tools-%d", n), func(string) (string, error) {
			if err := linkTool(s, "t0"); err != nil {
				return "", err
			}
			var m strings.Builder
			for i := range n {
				fmt.Fprintf(&m, "[tools.t%d]\nargs = [\"--t%d\"]\n\n", i, i)
			}
			return m.String(), nil
		}, []string{"t0"})
		if err != nil {
			return err
		}
		r.Env = env
		if log != "" {
			r.Env = append(r.Env, "GUARD_LOG="+log)
		}
		r.Argv = []string{filepath.Join(dir, "shim", "t0")}
		return nil
	}
}

// linkTool makes $TOOLS/name the one trivial tool, hard-linked.
func linkTool(s *Sandbox, name string) error {
	err := os.Link(s.Expand("$TOOLS/true"), s.Expand("$TOOLS/"+name))
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// cacheWorld is a row whose llama call is answered from the prompt cache,
// with models models in the manifest and entries other entries in the
// cache beside the one it hits.
func cacheWorld(models, entries int) func(*Sandbox, *Row) error {
	return func(s *Sandbox, r *Row) error {
		name := fmt.Sprintf("llama-%d-models-%d-entries", models, entries)
		dir, env, err := world(s, name, func(dir string) (string, error) {
			model := filepath.Join(dir, "models", "m0.gguf")
			if err := writeModel(model, 4096); err != nil {
				return "", err
			}
			llama := filepath.Join(dir, "bin", "llama-completion")
			if err := s.WriteFile(llama, "#!/bin/sh\nprintf 'a cached answer\\n\\n'\n", 0o755); err != nil {
				return "", err
			}
			m := fmt.Sprintf("models_dir = %q\n\n[tools.llama-completion]\npath = %q\n", filepath.Dir(model), llama)
			for i := range models {
				m += fmt.Sprintf("\n[[models]]\nfile = \"m%d.gguf\"\nsize = 4096\nurls = [\"https://models.example/m%d.gguf\"]\nbudget = { base = \"30s\", tokens_per_second = 20.0 }\n", i, i)
			}
			return m, nil
		}, []string{"llama-completion", "-m", filepath.Join(s.Dir, "scale", name, "models", "m0.gguf"), "-p", "hi", "-n", "4"})
		if err != nil {
			return err
		}
		if err := s.Once("entries "+name, func() error { return fillCache(filepath.Join(dir, "state", "prompts"), entries) }); err != nil {
			return err
		}
		r.Env = env
		r.Argv = []string{filepath.Join(dir, "shim", "llama-completion"), "-m", filepath.Join(dir, "models", "m0.gguf"), "-p", "hi", "-n", "4"}
		return nil
	}
}

// fillCache adds n entries to the prompt cache in dir, each a copy of the
// one entry the world's warm-up stored, under keys no call asks for.
func fillCache(dir string, n int) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var entry []byte
	for _, de := range des {
		if len(de.Name()) == 64 {
			if entry, err = os.ReadFile(filepath.Join(dir, de.Name())); err != nil {
				return err
			}
		}
	}
	if entry == nil {
		return fmt.Errorf("no prompt-cache entry in %s after the warm-up call", dir)
	}
	for i := range n {
		key := sha256.Sum256(fmt.Appendf(nil, "entry %d", i))
		if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(key[:])), entry, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// logWorld is a row of the tools-1 world with a heal log of size bytes
// (and a .1 as large, for a log past 5 MiB): an exec-path call, or with
// status guard status, whose exit status the setup reads.
func logWorld(size int64, status bool) func(*Sandbox, *Row) error {
	return func(s *Sandbox, r *Row) error {
		log := filepath.Join(s.Dir, "logs", sizeName(size)+".log")
		// The events are the tools-1 world's own (their install mark its
		// state folder): guard status shows an install's events only.
		install := filepath.Join(s.Dir, "scale", "tools-1", "state")
		if err := s.Once("log "+log, func() error { return writeHealLog(log, size, install) }); err != nil {
			return err
		}
		if err := toolsWorld(1, log)(s, r); err != nil {
			return err
		}
		if !status {
			return nil
		}
		r.Argv = []string{filepath.Join(filepath.Dir(r.Argv[0]), "guard"), "status"}
		out, err := s.RunEnv(r.Env, r.Argv...)
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			r.Status = exit.ExitCode()
		case err != nil:
			return err
		}
		if !strings.Contains(out, string(heallog.BinaryRebuild)) {
			return fmt.Errorf("guard status shows no heal event of the log:\n%s", indent(out))
		}
		return nil
	}
}

// writeHealLog writes a heal log of size bytes of events as guard writes
// them, oldest first, and for a log past guard's rotation (5 MiB) a full
// .1 of as many bytes before it, each event marked with install.
func writeHealLog(path string, size int64, install string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	files := []string{path}
	if size > 5<<20 {
		files = []string{path + ".1", path}
	}
	i := 0
	for _, file := range files {
		var b strings.Builder
		for {
			ts := start.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)
			line := fmt.Sprintf(`{"ts":%q,"level":"info","event":%q,"install":%q,"tool":"llama-completion","target":"/root/llama.cpp/build/bin/llama-completion","duration_ms":%d,"result":"ok"}`+"\n", ts, heallog.BinaryRebuild, install, 1000+i%900)
			if int64(b.Len()+len(line)) > size && b.Len() > 0 {
				break
			}
			b.WriteString(line)
			i++
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
			return err
		}
	}
	return nil
}
