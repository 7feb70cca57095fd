package manifest_test

import (
	"testing"

	"github.com/sandbox-guard/guard/manifest"
)

// BenchmarkParseDefault measures what every shim call pays to read the
// embedded default manifest.
func BenchmarkParseDefault(b *testing.B) {
	data := manifest.DefaultTOML()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := manifest.Parse(manifest.EmbeddedSource, data, "/home/u"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseError measures a manifest with an error, where the key
// index for line numbers is built.
func BenchmarkParseError(b *testing.B) {
	data := append(manifest.DefaultTOML(), "\n[tools.x]\nbuild = \"nope\"\n"...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := manifest.Parse("m.toml", data, "/home/u"); err == nil {
			b.Fatal("no error")
		}
	}
}
