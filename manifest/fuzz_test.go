package manifest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, that every error is an
// *Error (or several joined), and that whatever Parse accepts survives
// Encode and Parse: the second encoding equals the first. (Comparing the
// structs would trip over an empty table read back as a nil map.) Seeds and
// past findings live in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(defaultTOML)
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = indexKeys(data).lineOf(modelPath(1, "size"))
		m, err := Parse("fuzz.toml", data, "/home/u")
		if err != nil {
			checkErrorTree(t, err)
			return
		}
		var buf bytes.Buffer
		if err := m.Encode(&buf); err != nil {
			t.Fatalf("encode an accepted manifest: %v", err)
		}
		back, err := Parse("fuzz.toml", buf.Bytes(), "/home/u")
		if err != nil {
			t.Fatalf("encoded manifest does not parse: %v\n%s", err, buf.Bytes())
		}
		var again bytes.Buffer
		if err := back.Encode(&again); err != nil {
			t.Fatalf("encode the read-back manifest: %v", err)
		}
		if !bytes.Equal(buf.Bytes(), again.Bytes()) {
			t.Fatalf("round trip changed the manifest:\n%s\n---\n%s", buf.Bytes(), again.Bytes())
		}
	})
}

func checkErrorTree(t *testing.T, err error) {
	t.Helper()
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			checkErrorTree(t, e)
		}
		return
	}
	var me *Error
	if !errors.As(err, &me) || error(me) != err {
		t.Fatalf("error is %T, want *Error: %v", err, err)
	}
	if me.File != "fuzz.toml" || me.Msg == "" || me.Line < 0 {
		t.Fatalf("bad error %#v", me)
	}
}

// FuzzDecoded checks that no decoded-manifest file makes a load or a lookup
// panic or read past the file: a damaged one must only fail the load, or
// send a lookup to the whole manifest.
func FuzzDecoded(f *testing.F) {
	m, err := Parse(EmbeddedSource, defaultTOML, "/home/u")
	if err != nil {
		f.Fatal(err)
	}
	good, err := encodeIndex("k", m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:indexHeader])
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = readWhole(data, "k")
		file := filepath.Join(t.TempDir(), "decoded")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		lazy, err := openIndex(file, "k", func() (*Manifest, error) { return nil, errIndex })
		if err != nil {
			return
		}
		defer lazy.Close()
		lazy.Tool("npx")
		lazy.Build("llama-cpp")
		lazy.Package("cmake")
		lazy.FallbackModel(lazy.ModelByFile("/m/Qwen2.5-0.5B-Instruct-Q5_K_M.gguf"))
		lazy.ModelByRole("SCOUT")
		lazy.ToolNames()
	})
}
