package builds_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
)

// BenchmarkCheckBinaryHealthy is the per-call cost of the fast path: a
// dynamic ELF whose stamp holds (stat binary, read stamp, stat each library).
func BenchmarkCheckBinaryHealthy(b *testing.B) {
	bin := filepath.Join(copyFixtureBinB(b), "llama-completion")
	stamps := b.TempDir()
	if h := builds.CheckBinary(bin, stamps); !h.OK {
		b.Fatal(h)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !builds.CheckBinary(bin, stamps).OK {
			b.Fatal("unhealthy")
		}
	}
}

// BenchmarkCheckBinaryUnstamped is the slow path, for comparison.
func BenchmarkCheckBinaryUnstamped(b *testing.B) {
	bin := filepath.Join(copyFixtureBinB(b), "llama-completion")
	b.ReportAllocs()
	for b.Loop() {
		if !builds.CheckBinary(bin, "").OK {
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

// BenchmarkRebuild times a cold rebuild of the fixture (build folder
// evicted) by the bare cmake steps and through Builder.Build, interleaved
// so that load from other processes hits both alike. bench/rebuild.sh
// prints the ratio.
func BenchmarkRebuild(b *testing.B) {
	requireCmake(b)
	src := filepath.Join(b.TempDir(), "src")
	if err := copyTree(fixtureSrc, src); err != nil {
		b.Fatal(err)
	}
	rec := fixtureRecipe(src)
	target := filepath.Join(src, "build", "bin", "llama-completion")
	builder := &builds.Builder{StateDir: b.TempDir(), Env: testEnv(b, "")}
	// The bare run gets the environment the builder gives its steps, so a
	// ccache on PATH helps both or neither.
	env := append([]string(nil), builder.Env...)
	if _, err := exec.LookPath("ccache"); err == nil {
		env = append(env, "CMAKE_C_COMPILER_LAUNCHER=ccache", "CMAKE_CXX_COMPILER_LAUNCHER=ccache")
	}
	evict := func() {
		if err := os.RemoveAll(filepath.Join(src, "build")); err != nil {
			b.Fatal(err)
		}
	}
	var bare, guarded time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		evict()
		start := time.Now()
		for _, step := range rec.Steps {
			cmd := exec.Command(step[0], step[1:]...)
			cmd.Dir, cmd.Env = src, env
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %v\n%s", step, err, out)
			}
		}
		bare += time.Since(start)

		evict()
		start = time.Now()
		if err := builder.Build(context.Background(), "llama-completion", rec, target); err != nil {
			b.Fatal(err)
		}
		guarded += time.Since(start)
	}
	b.StopTimer()
	b.ReportMetric(float64(bare.Milliseconds())/float64(b.N), "bare-ms/op")
	b.ReportMetric(float64(guarded.Milliseconds())/float64(b.N), "guard-ms/op")
	b.ReportMetric(float64(guarded)/float64(bare), "ratio")
}
