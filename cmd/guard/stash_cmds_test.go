package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/stash"
)

func init() {
	scriptCmds["stashcraft"] = cmdStashCraft
	scriptCmds["registry"] = cmdRegistry
}

// registry starts a real OCI registry (CNCF distribution, in-process,
// plain http on 127.0.0.1) for the rest of the script, sets $REGISTRY to
// its HOST:PORT, and signs $HOME in to it as `docker login` would.
func cmdRegistry(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registry")
	}
	reg, err := guardtest.NewRegistry(ts.MkAbs("."))
	ts.Check(err)
	ts.Defer(reg.Close)
	ts.Setenv("REGISTRY", reg.Host)
	ts.Check(reg.DockerLogin(ts.Getenv("HOME")))
}

// stashcraft STASH DIR PATH FILE writes into DIR, as a hostile neighbour
// would, an index and an entry with the recipe and key of STASH's first
// entry, holding FILE as PATH (mode 0755): an entry any machine whose
// sources match would take for its build.
func cmdStashCraft(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: stashcraft STASH DIR PATH FILE")
	}
	items, err := (&stash.Store{Dir: ts.MkAbs(args[0])}).List()
	ts.Check(err)
	if len(items) == 0 {
		ts.Fatalf("no entry in %s", args[0])
	}
	it := items[0]
	root := ts.MkAbs("craft-root")
	target := filepath.Join(root, filepath.FromSlash(args[2]))
	ts.Check(os.MkdirAll(filepath.Dir(target), 0o755))
	ts.Check(os.WriteFile(target, []byte(ts.ReadFile(args[3])), 0o755))
	made := &stash.Store{Dir: ts.MkAbs("craft-stash")}
	_, err = made.Save(context.Background(), it.Recipe, stash.Key{Sum: it.Key}, root, []string{"build"}, []string{target})
	ts.Check(err)
	dir := ts.MkAbs(args[1])
	ts.Check(os.MkdirAll(dir, 0o777))
	names, err := filepath.Glob(filepath.Join(made.Dir, "*"))
	ts.Check(err)
	for _, n := range names {
		if filepath.Ext(n) == ".lock" {
			continue
		}
		data, err := os.ReadFile(n)
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(dir, filepath.Base(n)), data, 0o666))
	}
	ts.Check(os.RemoveAll(root))
	ts.Check(os.RemoveAll(made.Dir))
}
