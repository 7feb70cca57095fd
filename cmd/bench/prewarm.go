package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// prewarmModelMB is the small model the prewarm table downloads.
const prewarmModelMB = 64

// prewarmThink is the agent's think time between a new shell and its
// first llama call in the "think" rows.
const prewarmThink = 2 * time.Second

// prewarmTable times a fresh login shell to its first answered llama
// call, after an eviction took the built fixture (the CMake project
// standing in for llama.cpp) and the model (served over loopback): with
// and without guard install --prewarm, with the call at once and after a
// think time. Without pre-warm the call heals first (rebuild, download);
// with it the shell's start has begun that heal in the background, so
// the call finds it done or waits on its lock for the rest.
func prewarmTable() *Table {
	call := "llama-completion -m \"$HOME/models/m.gguf\" -p hi -n 4"
	think := "sleep " + strconv.FormatFloat(prewarmThink.Seconds(), 'f', -1, 64) + "; "
	rows := []Row{}
	for _, r := range []struct {
		name    string
		prewarm bool
		think   bool
	}{{"cold", false, false}, {"prewarm", true, false}, {"cold-think", false, true}, {"prewarm-think", true, true}} {
		cmd := call
		if r.think {
			cmd = think + call
		}
		rows = append(rows, Row{
			Name:   r.name,
			Setup:  guardInstalled,
			Before: evictForPrewarm(r.prewarm),
			Argv:   []string{"bash", "-lc", cmd},
			Dir:    "$HOME",
		})
	}
	return &Table{
		Name: "prewarm",
		Title: fmt.Sprintf("A fresh shell to its first answered llama call after an eviction, with and without guard install --prewarm "+
			"(CMake fixture, %d MB model over loopback; the think rows call after %s)", prewarmModelMB, prewarmThink),
		Anchors: []string{"cold", "cold-think"},
		Knobs:   Knobs{Runs: 3, Rounds: 3, Warmup: 0, Stat: "median"},
		Timeout: 10 * time.Minute,
		Setup:   prewarmSetup,
		Rows:    rows,
	}
}

// prewarmSetup: the fixture as ~/llama.cpp, the model on a loopback file
// server, a manifest naming both.
func prewarmSetup(s *Sandbox) error {
	if err := rebuildSetup(s); err != nil {
		return err
	}
	srv := filepath.Join(s.Dir, "srv")
	if err := writeModel(filepath.Join(srv, "m.gguf"), prewarmModelMB<<20); err != nil {
		return err
	}
	url, err := serveFolder(s, srv, false)
	if err != nil {
		return err
	}
	manifest, err := os.ReadFile(s.Expand("$GUARD_MANIFEST"))
	if err != nil {
		return err
	}
	return s.WriteFile("$GUARD_MANIFEST", fmt.Sprintf(`models_dir = "~/models"
%s
[[models]]
file = "m.gguf"
size = %d
urls = ["%s/m.gguf"]
`, manifest, prewarmModelMB<<20, url), 0o644)
}

// evictForPrewarm is a row's Before: the build folder and the model gone,
// no prewarm stamp left from the last sample, and the PATH block written
// with or without the prewarm hook.
func evictForPrewarm(prewarm bool) func(*Sandbox) error {
	return func(s *Sandbox) error {
		for _, p := range []string{"$HOME/llama.cpp/build", "$HOME/models/m.gguf", "$STATE_DIR/prewarm.stamp"} {
			if err := os.RemoveAll(s.Expand(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		args := []string{"$SHIM_DIR/guard", "install"}
		if prewarm {
			args = append(args, "--prewarm")
		}
		out, err := s.Run(args...)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
}
