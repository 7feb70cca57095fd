package openclaw

import (
	"strings"
	"testing"
)

// acceptCases are JSON5 that json5 2.2.3 (the parser OpenClaw uses)
// reads; rejectCases are what it refuses.
var acceptCases = []string{
	`{}`,
	"\uFEFF{}",
	`{"a": 1}`,
	`{a: 1, b: 'two', "c": [1, 2, 3,],}`,
	"// a comment\n{ /* inline */ a: 1 // tail\n}\n",
	`{$x_1: null, _y: true, z: false, ünï: 0}`,
	`{n: [0, -1, +1, 1.5, .5, 5., 1e3, 1E-3, 0x1F, -0XaB, Infinity, -Infinity, NaN]}`,
	`{s: 'it\'s', d: "say \"hi\"", e: "\b\f\n\r\t\v\0\\\/\x41\u0042\uD83D\uDE00"}`,
	"{s: 'line one \\\nline two'}",
	"{s: 'a\u2028b'}",
	`[1, "x", {a: [[]]}]`,
	`"just a string"`,
	`{\u0061b: 1}`,
}

var rejectCases = []string{
	``,
	`{`,
	`{a: 1`,
	`{a 1}`,
	`{a: 1,,}`,
	`[1,,2]`,
	`{a: 01}`,
	`{a: 1.2.3}`,
	`{a: 0x}`,
	`{a: 'x}`,
	"{a: 'x\ny'}",
	`{a: '\1'}`,
	`{a: "\u12"}`,
	`{a: undefined}`,
	`{1a: 1}`,
	`{a: 1} x`,
	`/* open`,
	`{a: 1} /* open`,
	`{a: [1 2]}`,
}

func TestParseAcceptsJSON5(t *testing.T) {
	for _, text := range acceptCases {
		if _, err := parse([]byte(text)); err != nil {
			t.Errorf("parse(%q): %v", text, err)
		}
	}
}

func TestParseRejectsWhatIsNotJSON5(t *testing.T) {
	// Besides what json5 refuses: bytes that are not UTF-8 (node reads
	// them as U+FFFD) and nesting past maxDepth.
	deep := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	for _, text := range append(rejectCases, "{a: '\xff'}", deep) {
		if _, err := parse([]byte(text)); err == nil {
			t.Errorf("parse(%q) accepted it", text)
		}
	}
}

func TestParseDecodes(t *testing.T) {
	root, err := parse([]byte(`{'tools': {exec: {pathPrepend: ['/a', "\/b\u0020c", 'd\
e', 3]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := entries(root)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "/a|/b c|de" {
		t.Errorf("entries %q", got)
	}
}

func TestParseErrorSaysWhere(t *testing.T) {
	_, err := parse([]byte("{\n  a: 1,\n  b: ?\n}"))
	if err == nil || !strings.HasPrefix(err.Error(), "line 3, column 6:") {
		t.Errorf("error %v, want it at line 3, column 6", err)
	}
}

// FuzzEdit holds, for any text: parse never panics; an insertion into a
// config that takes one yields a config that parses and holds the folder;
// taking the inserted bytes out gives the text back byte for byte; and
// where the list was already there, removing the entry does too.
func FuzzEdit(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{tools: {}}`, `{tools: {exec: {}}}`, `{tools: {exec: {pathPrepend: []}}}`,
		"{\n  \"tools\": {\n    \"exec\": {\n      \"pathPrepend\": [\n        \"/opt/bin\"\n      ]\n    }\n  }\n}\n",
		"// c\n{ tools: { exec: { pathPrepend: [ /* x */ '/a', ], timeoutSeconds: 5 } }, }",
		`{tools: 1}`, `{tools: {exec: {pathPrepend: "x"}}}`, `[]`, `{a: 'b'`,
	} {
		f.Add(seed, "/root/.shim")
	}
	f.Fuzz(func(t *testing.T, text, dir string) {
		root, err := parse([]byte(text))
		if err != nil {
			return
		}
		ins, err := addEntry([]byte(text), root, dir)
		if err != nil || ins.text == "" {
			return
		}
		out := text[:ins.at] + ins.text + text[ins.at:]
		r2, err := parse([]byte(out))
		if err != nil {
			t.Fatalf("insert %q at %d into %q: %v", ins.text, ins.at, text, err)
		}
		list, err := entries(r2)
		if err != nil || len(list) == 0 || list[0] != dir {
			t.Fatalf("after the insertion into %q the list is %q (%v), want %q first", text, list, err, dir)
		}
		if back := out[:ins.at] + out[ins.at+len(ins.text):]; back != text {
			t.Fatalf("taking the insertion out gave %q, want %q", back, text)
		}
		if arr, _ := setting(root); arr != nil {
			back, found, err := removeEntry([]byte(out), r2, dir)
			if err != nil || !found || string(back) != text {
				t.Fatalf("removing %q from %q gave %q (%v, %v), want %q", dir, out, back, found, err, text)
			}
		}
	})
}
