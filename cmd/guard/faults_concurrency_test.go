package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-guard/guard/guard/install"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// runParallel starts every call at once (they line up on a barrier) and
// returns their results in order.
func (e *faultEnv) runParallel(calls [][]string) []faultResult {
	res := make([]faultResult, len(calls))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i] = e.Run(c[0], c[1:]...)
		}()
	}
	close(start)
	wg.Wait()
	return res
}

// Twenty first calls at once that need the same missing model and the same
// missing build: one download, one build, every call answers.
func TestConcurrentFirstCalls(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cold CMake build")
	}
	srv := newFaultModelServer(t, 1<<20, 4<<20)
	e := newBuildEnv(t, strings.Replace(buildManifest, `size = 64`,
		fmt.Sprintf("size = %d\nsha256 = %q\nurls = [%q]", len(srv.Data), srv.SHA256, srv.URL()), 1))
	model := filepath.Join(e.Home, "models", "m.gguf")
	const n = 20
	calls := make([][]string, n)
	for i := range calls {
		calls[i] = []string{"llama-simple", "-m", model, fmt.Sprintf("q%d", i)}
	}
	for i, r := range e.runParallel(calls) {
		if r.Code != 0 || !strings.Contains(r.Stdout, fmt.Sprintf("arg: q%d\n", i)) {
			t.Errorf("call %d: %s", i, r)
		}
		assertNoCrash(t, fmt.Sprint("call ", i), r)
	}
	if got := srv.gets.Load(); got != 1 {
		t.Errorf("the model was requested %d times, want once", got)
	}
	if got := countLines(filepath.Join(e.Dir, "builds")); got != 1 {
		t.Errorf("the recipe ran %d times, want once", got)
	}
	downloads := logEvents(t, e.Log, "model.download")
	rebuilds := logEvents(t, e.Log, "binary.rebuild")
	waits := logEvents(t, e.Log, "lock.wait")
	if len(downloads) != 1 || len(rebuilds) != 1 {
		t.Errorf("heal log: %d model.download and %d binary.rebuild events, want one each", len(downloads), len(rebuilds))
	}
	checkLocksFree(t, e.StateDir)
	checkLogLines(t, e.Log)
	t.Logf("%d parallel first calls: %d GET, %d recipe run, %d lock.wait events", n, srv.gets.Load(), countLines(filepath.Join(e.Dir, "builds")), len(waits))
}

// Calls of three different shims at once while the shim folder is gone
// (evicted whole): the folder and its links come back exactly once and no
// call fails. The calls reach guard through a second copy of its links, as
// a script that cached the tools' paths would.
func TestConcurrentShimRepair(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t, `
[tools.npx]
args = ["--yes"]

[tools.llama-completion]
path = "$BIN/llama-completion"
cache = false

[tools.llama-simple]
path = "$BIN/llama-simple"
cache = false
`)
	e.Tool("npx", `echo "npx $*"`)
	e.Tool("llama-completion", `p=; prev=
for a in "$@"; do [ "$prev" = -p ] && p=$a; prev=$a; done
echo "completion $p"`)
	e.Tool("llama-simple", `for a in "$@"; do last=$a; done; echo "simple $last"`)
	model := filepath.Join(e.Home, "m.gguf")
	guardtest.WriteGGUF(t, model, 64)
	alt := filepath.Join(e.Dir, "alt")
	if err := os.MkdirAll(alt, 0o755); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Readlink(e.Guard)
	if err := os.Symlink(self, filepath.Join(alt, "guard")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"npx", "llama-completion", "llama-simple"} {
		if err := os.Symlink("guard", filepath.Join(alt, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(e.ShimDir); err != nil {
		t.Fatal(err)
	}
	before := len(logEvents(t, e.Log, "shim.recreate"))

	const each = 7
	var calls [][]string
	var want []string
	for i := range each {
		calls = append(calls,
			[]string{filepath.Join(alt, "npx"), "cowsay", fmt.Sprint(i)},
			[]string{filepath.Join(alt, "llama-completion"), "-m", model, "-p", fmt.Sprint("c", i), "-n", "4"},
			[]string{filepath.Join(alt, "llama-simple"), "-m", model, fmt.Sprint("s", i)})
		want = append(want, fmt.Sprintf("npx --yes cowsay %d\n", i), fmt.Sprintf("completion c%d\n", i), fmt.Sprintf("simple s%d\n", i))
	}
	for i, r := range e.runParallel(calls) {
		if r.Code != 0 || r.Stdout != want[i] {
			t.Errorf("%s: %s", filepath.Base(calls[i][0]), r)
		}
		assertNoCrash(t, calls[i][0], r)
	}
	for _, name := range []string{"guard", "npx", "llama-completion", "llama-simple"} {
		p := filepath.Join(e.ShimDir, name)
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&0o111 == 0 {
			t.Errorf("shim %s did not come back (%v)", p, err)
		}
	}
	recreated := map[string]int{}
	for _, ev := range logEvents(t, e.Log, "shim.recreate")[before:] {
		recreated[fmt.Sprint(ev["tool"])]++
	}
	for name, n := range recreated {
		if n != 1 {
			t.Errorf("shim %s was re-created %d times, want once", name, n)
		}
	}
	if len(recreated) != 4 {
		t.Errorf("re-created shims: %v, want guard and the three links once each", recreated)
	}
	ents, _ := os.ReadDir(e.ShimDir)
	var names []string
	for _, ent := range ents {
		if ent.Name() != install.CopyStamp && ent.Name() != install.LinksStamp { // the copy's and the links' stamps
			names = append(names, ent.Name())
		}
	}
	if len(names) != 4 {
		t.Errorf("the shim folder holds %v, want guard and three links (no temp files)", names)
	}
	t.Logf("%d parallel calls through three shims: re-created %v", len(calls), recreated)
}
