package guard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoModSaysWhatTheBinaryLinks holds go.mod to what it says: its first
// require block is the modules the guard binary links (each paid for at the
// start of every shim call), its second those only the tests, their helper
// package and the benchmark floors import. A module the binary starts to
// link must move to the first block; one it stops linking, to the second.
func TestGoModSaysWhatTheBinaryLinks(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks [][]string
	var cur []string
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			in, cur = true, nil
		case in && line == ")":
			in = false
			blocks = append(blocks, cur)
		case in && line != "" && !strings.HasPrefix(line, "//") && !strings.HasSuffix(line, "// indirect"):
			cur = append(cur, strings.Fields(line)[0])
		}
	}
	if len(blocks) < 2 || len(blocks[0]) == 0 || len(blocks[1]) == 0 {
		t.Fatalf("go.mod has %d require blocks of direct modules; want the binary's, then the tests'", len(blocks))
	}
	binary, testOnly := blocks[0], blocks[1]

	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "../cmd/guard").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/guard: %v", err)
	}
	linked := map[string]bool{}
	for m := range strings.FieldsSeq(string(out)) {
		linked[m] = true
	}
	for _, m := range binary {
		if !linked[m] {
			t.Errorf("go.mod's first block (what the binary links) has %s, which the binary does not link: move it to the tests' block", m)
		}
	}
	for _, m := range testOnly {
		if linked[m] {
			t.Errorf("go.mod's second block (what only tests import) has %s, which the binary links: move it to the first block", m)
		}
	}
}
