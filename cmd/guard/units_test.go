package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// What guard says speaks one unit family, the binary one (KiB, MiB, GiB:
// the plan, progress, the stash and status alike), and puts a plural only
// past one (guard/units; docs/exit-status-and-events.md, "Sizes and
// counts"). TestOneUnitFamily reads every string literal of guard's own
// code (not cmd/bench, whose tables are measurements in their own units)
// and fails on a decimal unit after a number or a verb ("%.1f MB",
// "12 kB/s"), or a count verb before a plural noun ("%d files"), which
// says "1 files" for one. "%d bytes" is left: bytes stand exact, as in
// "196608 more bytes", beside the unit-family figure, and so is a count
// that cannot be one: "more than %d files", "%d times in a row" (the loop
// limit).
func TestOneUnitFamily(t *testing.T) {
	t.Parallel()
	decimal := regexp.MustCompile(`(\d|%[-+ #0-9.]*[dfgvs]) ?(kB|KB|MB|GB|TB)\b`)
	plural := regexp.MustCompile(`(more than )?%d ([a-z]+s)\b`)
	allowed := map[string]bool{"bytes": true, "is": true, "times": true}
	root := repoRoot()
	checked := 0
	for _, dir := range []string{"guard", "cmd/guard", "manifest", "shims"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			checked++
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				if m := decimal.FindString(s); m != "" {
					t.Errorf("%s: %q says %q: write sizes with guard/units (KiB, MiB, GiB)", rel, s, m)
				}
				for _, m := range plural.FindAllStringSubmatch(s, -1) {
					if m[1] == "" && !allowed[m[2]] {
						t.Errorf("%s: %q says %q, which reads \"1 %s\" for one: use units.Count", rel, s, m[0], m[2])
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("read %d Go files: the walk did not find guard's code", checked)
	}
}
