package guard_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFilesCallDownward holds the engine to its layout: the call path reads
// top-down, one floor at a time, so no file calls a function of a file that
// calls, directly or through others, back into it.
func TestFilesCallDownward(t *testing.T) {
	for _, pkg := range []string{".", "./commands"} {
		t.Run(pkg, func(t *testing.T) {
			graph := callGraph(t, pkg)
			for _, cycle := range cycles(graph) {
				t.Errorf("these files call each other, directly or in a circle: %s", strings.Join(cycle, ", "))
			}
		})
	}
}

// callGraph maps each non-test file of the package in dir to the files
// whose functions and methods it calls or takes as values.
func callGraph(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: exportImporter(t, fset, dir)}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(dir, fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	edges := map[string]map[string]bool{}
	for id, obj := range info.Uses {
		fn, ok := obj.(*types.Func)
		if !ok || fn.Pkg() != pkg {
			continue
		}
		from, to := filepath.Base(fset.File(id.Pos()).Name()), filepath.Base(fset.File(fn.Pos()).Name())
		if from == to {
			continue
		}
		if edges[from] == nil {
			edges[from] = map[string]bool{}
		}
		edges[from][to] = true
	}
	graph := map[string][]string{}
	for from, tos := range edges {
		for to := range tos {
			graph[from] = append(graph[from], to)
		}
		slices.Sort(graph[from])
	}
	return graph
}

// exportImporter imports the package's dependencies from the compiler's
// export data, which go list builds: fast, and exact about every type.
func exportImporter(t *testing.T, fset *token.FileSet, dir string) types.Importer {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	export := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			export[path] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(export[path])
	})
}

// cycles returns each circle of the graph once (Tarjan's strongly
// connected components of more than one file).
func cycles(graph map[string][]string) [][]string {
	var (
		index   = map[string]int{}
		low     = map[string]int{}
		onStack = map[string]bool{}
		stack   []string
		out     [][]string
		next    int
		visit   func(string)
	)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range graph[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 {
				slices.Sort(scc)
				out = append(out, scc)
			}
		}
	}
	nodes := make([]string, 0, len(graph))
	for v := range graph {
		nodes = append(nodes, v)
	}
	slices.Sort(nodes)
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}

// TestPackagesImportAsDocumented holds the packages to the import rule of
// docs/contributing.md ("Who may import whom"): the engine calls the leaf
// packages and they never call back. Each package of the module has a row
// there, and imports of guard's own only the packages its row names.
func TestPackagesImportAsDocumented(t *testing.T) {
	const module = "github.com/sandbox-guard/guard"
	doc, err := os.ReadFile(filepath.Join("..", "docs", "contributing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## Who may import whom\n")
	if !ok {
		t.Fatal(`docs/contributing.md has no "Who may import whom" section`)
	}
	code := regexp.MustCompile("`([^`]+)`")
	allowed := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || !strings.Contains(cells[1], "`") {
			continue
		}
		var may []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			may = append(may, m[1])
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			allowed[m[1]] = may
		}
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	short := func(path string) string {
		return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, imports, _ := strings.Cut(line, "\t")
		pkg := short(path)
		if pkg == "" {
			pkg = "."
		}
		may, ok := allowed[pkg]
		if !ok {
			t.Errorf("%s has no row in docs/contributing.md's \"Who may import whom\": add one", pkg)
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, module+"/") && !slices.Contains(may, short(imp)) {
				t.Errorf("%s imports %s, which its row in docs/contributing.md does not allow", pkg, short(imp))
			}
		}
	}
}
