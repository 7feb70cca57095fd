package manifest

import (
	"testing"

	"github.com/pelletier/go-toml/v2/unstable"
)

// keyDoc exercises what the scanner must not be fooled by: brackets and
// "key =" inside strings and multi-line values, comments, quoted and dotted
// keys, arrays of tables with sub-tables, inline tables over several lines.
const keyDoc = `# [not.a.table]
log = "/tmp/x.log" # comment with key = 1
"quoted key" = 1
'literal.key' = 2

[builds.llama-cpp]
steps = [
  ["cmake", "-B", "build"],   # [fake]
  [
    "cmake", "--build", "build",
  ],
]
note = """
[tools.fake]
fake = 1
"""
lit = '''
[[models]]
'''

[tools."g++"]
path.dir = "/x"
env = { A = "1", B = "[2]" }

[[models]]
file = "a.gguf"
urls = ["https://a/1", "https://a/2"]

[[models]]
file = "b.gguf"
budget = { base = "1s",
  tokens_per_second = 3 }
[models.budget.extra]
x = 1
[[models.parts]]
n = 1
[[models.parts]]
n = 2

[ swarm . roles ]
SCOUT = "fast"
`

func TestLineOf(t *testing.T) {
	x := indexKeys([]byte(keyDoc))
	tests := []struct {
		path keyPath
		line int
	}{
		{path("log"), 2},
		{path("quoted key"), 3},
		{path("literal.key"), 4},
		{path("builds", "llama-cpp"), 6},
		{path("builds", "llama-cpp", "steps"), 7},
		{path("builds", "llama-cpp", "steps").index(0), 8},
		{path("builds", "llama-cpp", "steps").index(1), 9},
		{path("builds", "llama-cpp", "steps").index(1).index(2), 10},
		{path("builds", "llama-cpp", "note"), 13},
		{path("builds", "llama-cpp", "lit"), 17},
		{path("tools", "g++"), 21},
		{path("tools", "g++", "path"), 22},
		{path("tools", "g++", "path", "dir"), 22},
		{path("tools", "g++", "env", "B"), 23},
		{modelPath(0), 25},
		{modelPath(0, "file"), 26},
		{modelPath(0, "urls").index(1), 27},
		{modelPath(1), 29},
		{modelPath(1, "file"), 30},
		{modelPath(1, "budget", "tokens_per_second"), 32},
		{modelPath(1, "budget", "extra", "x"), 34},
		{modelPath(1, "parts").index(1), 37},
		{modelPath(1, "parts").index(1).key("n"), 38},
		{path("swarm", "roles", "SCOUT"), 41},
		// not written: the nearest written parent
		{modelPath(1, "size"), 29},
		{path("builds", "llama-cpp", "timeout"), 6},
		{path("tools", "fake"), 0},
		{path("nothing", "here"), 0},
		{modelPath(5, "file"), 0},
	}
	for _, tt := range tests {
		if got := x.lineOf(tt.path); got != tt.line {
			t.Errorf("lineOf(%s) = %d, want %d", tt.path, got, tt.line)
		}
	}
}

func TestRawValue(t *testing.T) {
	x := indexKeys([]byte(keyDoc))
	tests := map[string]keyPath{
		`"/tmp/x.log"`:  path("log"),
		`"1s"`:          modelPath(1, "budget", "base"),
		`3`:             modelPath(1, "budget", "tokens_per_second"),
		`"[2]"`:         path("tools", "g++", "env", "B"),
		`"https://a/2"`: modelPath(0, "urls").index(1),
		``:              path("missing"),
	}
	for want, p := range tests {
		if got := x.raw(p); got != want {
			t.Errorf("raw(%s) = %q, want %q", p, got, want)
		}
	}
}

// TestNthLineMatchesTheParser checks that the scanner lists definitions as
// the TOML parser sees them (headers and full keys, inline tables' keys
// included), since unknown keys are placed by counting.
func TestNthLineMatchesTheParser(t *testing.T) {
	counts := map[string]int{}
	var see func(prefix tomlKey, kv *unstable.Node)
	see = func(prefix tomlKey, kv *unstable.Node) {
		k := prefix
		for it := kv.Key(); it.Next(); {
			k = append(k[:len(k):len(k)], string(it.Node().Data))
		}
		counts[k.String()]++
		if v := kv.Value(); v.Kind == unstable.InlineTable {
			for it := v.Children(); it.Next(); {
				see(k, it.Node())
			}
		}
	}
	var p unstable.Parser
	p.Reset([]byte(keyDoc))
	var table tomlKey
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = nil
			for it := e.Key(); it.Next(); {
				table = append(table, string(it.Node().Data))
			}
			counts[table.String()]++
		case unstable.KeyValue:
			see(table, e)
		}
	}
	if err := p.Error(); err != nil {
		t.Fatal(err)
	}
	x := indexKeys([]byte(keyDoc))
	for ks, n := range counts {
		if len(x.seen[ks]) != n {
			t.Errorf("key %s: scanner saw %d, the parser %d", ks, len(x.seen[ks]), n)
		}
	}
	for ks, offs := range x.seen {
		if counts[ks] != len(offs) {
			t.Errorf("key %s: scanner saw %d, the parser %d", ks, len(offs), counts[ks])
		}
	}
	if got := x.nthLine(tomlKey{"models", "file"}, 1); got != 30 {
		t.Errorf("second models.file on line %d, want 30", got)
	}
}

func TestKeyPathString(t *testing.T) {
	tests := map[string]keyPath{
		"models[2].size":          modelPath(2, "size"),
		`packages."g++"`:          path("packages", "g++"),
		`tools."a.b".fallback[0]`: path("tools", "a.b", "fallback").index(0),
		`x."[0]"`:                 path("x", "[0]"),
		`x[0][1]`:                 path("x").index(0).index(1),
	}
	for want, p := range tests {
		if got := p.String(); got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

func TestIndexKeysOddInput(t *testing.T) {
	for _, doc := range []string{
		"", "[", "[[", "[[a", "a", "a =", "a = [", "a = {", `a = "`, `a = """`, "a = '''x''",
		"\uFEFFa = 1\n[b]\nc = 2\n", "a = [1,,]\n", "a = { b = }\n", "[a.]\nb = 1\n", `"\u00e9" = 1`,
		"\"\\", "a.\"", "x = [{]", "\r\n\r\n[b]\r\nc = 1\r\n",
	} {
		x := indexKeys([]byte(doc))
		_ = x.lineOf(path("b", "c"))
	}
	x := indexKeys([]byte("\uFEFFa = 1\n[b]\nc = 2\n"))
	if got := x.lineOf(path("b", "c")); got != 3 {
		t.Errorf("after a BOM: line %d, want 3", got)
	}
	x = indexKeys([]byte("\r\n\r\n[b]\r\nc = 1\r\n"))
	if got := x.lineOf(path("b", "c")); got != 4 {
		t.Errorf("CRLF: line %d, want 4", got)
	}
}

func TestUnescapeBasic(t *testing.T) {
	tests := map[string]string{
		`plain`:                "plain",
		`a\"b`:                 `a"b`,
		`\u00e9\U0001F600\x41`: "é😀A",
		`\t\n\\`:               "\t\n\\",
		`\q`:                   `\q`,
		`\u12`:                 `\u12`,
		`\UFFFFFFFF`:           `\UFFFFFFFF`,
		`end\`:                 `end\`,
	}
	for in, want := range tests {
		if got := unescapeBasic(in); got != want {
			t.Errorf("unescapeBasic(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	tests := map[string]tomlKey{
		"stall":             {"tools", "npx", "stal"},
		"tokens_per_second": {"models", "budget", "tokens_per_secnd"},
		"log":               {"logg"},
		"":                  {"completely_different"},
	}
	for want, k := range tests {
		if got := suggest(k); got != want {
			t.Errorf("suggest(%s) = %q, want %q", k, got, want)
		}
	}
	if got := suggest(tomlKey{"packages", "x", "y"}); got != "" {
		t.Errorf("below a string map: %q", got)
	}
}
