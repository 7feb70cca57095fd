package builds_test

import (
	"path/filepath"
	"testing"

	"github.com/sandbox-guard/guard/guard/builds"
)

// BenchmarkCheckBinaryHealthy is the per-call cost of the fast path: a
// dynamic ELF whose stamp holds (stat binary, read stamp, stat each library).
func BenchmarkCheckBinaryHealthy(b *testing.B) {
	bin := filepath.Join(copyFixtureBinB(b), "llama-completion")
	stamps := b.TempDir()
	if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
		b.Fatal(h)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !builds.CheckBinary(bin, stamps, "").OK {
			b.Fatal("unhealthy")
		}
	}
}

// BenchmarkCheckBinaryUnstamped is the slow path, for comparison.
func BenchmarkCheckBinaryUnstamped(b *testing.B) {
	bin := filepath.Join(copyFixtureBinB(b), "llama-completion")
	b.ReportAllocs()
	for b.Loop() {
		if !builds.CheckBinary(bin, "", "").OK {
			b.Fatal("unhealthy")
		}
	}
}

func copyFixtureBinB(b *testing.B) string {
	src := builtFixtureBin(b)
	dir := b.TempDir()
	for _, name := range []string{"llama-completion", "libfixture.so"} {
		if err := copyFile(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}
