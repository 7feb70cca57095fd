package builds_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/manifest"
)

// BenchmarkRestore is an evicted build's way back from the stash in a
// call's own process (Builder.RestoreNow: the lock, the key, the entry's
// read and sha256, its zstd, the files written and hashed, the health
// check), on a git checkout whose build/bin holds one large binary (this
// test's own executable, about the 12.6 MB of a llama.cpp build/bin under
// -race). Each part's time is a metric of its own: go test -run '^$'
// -bench Restore -benchtime 20x ./guard/builds (docs/BENCHMARKS.md).
func BenchmarkRestore(b *testing.B) {
	git, err := exec.LookPath("git")
	if err != nil {
		b.Skip("git is not installed; the key of a checkout needs it")
	}
	dir := b.TempDir()
	for _, argv := range [][]string{{"init", "-q"}, {"config", "user.email", "t@example.com"}, {"config", "user.name", "t"}} {
		if out, err := exec.Command(git, append([]string{"-C", dir}, argv...)...).CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", argv, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "main.c"), []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, argv := range [][]string{{"add", "."}, {"commit", "-qm", "one"}} {
		if out, err := exec.Command(git, append([]string{"-C", dir}, argv...)...).CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", argv, err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	target := filepath.Join(dir, "build", "bin", "tool")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := copyFile(self, target); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		b.Fatal(err)
	}
	bld, _, _ := newBuilder(b, os.Getenv("PATH"))
	bld.Stash = &stash.Store{Dir: filepath.Join(bld.StateDir, "stash")}
	rec := &manifest.Build{Name: "big", Dir: dir, Steps: [][]string{{"true"}}, Outputs: []string{"build"}}
	ctx := context.Background()
	key, err := bld.StashKey(ctx, rec)
	if err != nil {
		b.Fatal(err)
	}
	it, err := bld.Stash.Save(ctx, rec.Name, key, dir, rec.Outputs, []string{target})
	if err != nil {
		b.Fatal(err)
	}
	evict := func() {
		if err := os.RemoveAll(filepath.Join(dir, "build")); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("parts", func(b *testing.B) {
		var tKey, tRestore, tCheck time.Duration
		for b.Loop() {
			b.StopTimer()
			evict()
			b.StartTimer()
			t0 := time.Now()
			k, err := bld.StashKey(ctx, rec)
			t1 := time.Now()
			if err != nil || k.Sum != key.Sum {
				b.Fatalf("key %v, %v", k, err)
			}
			if _, err := bld.Stash.Restore(ctx, rec.Name, k, dir, rec.Outputs, nil); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if h := builds.CheckBinary(target, bld.StampDir(), ""); !h.OK {
				b.Fatal(h)
			}
			t3 := time.Now()
			tKey += t1.Sub(t0)
			tRestore += t2.Sub(t1)
			tCheck += t3.Sub(t2)
		}
		n := float64(b.N)
		b.ReportMetric(float64(tKey.Microseconds())/n/1000, "key-ms/op")
		b.ReportMetric(float64(tRestore.Microseconds())/n/1000, "restore-ms/op")
		b.ReportMetric(float64(tCheck.Microseconds())/n/1000, "check-ms/op")
		b.ReportMetric(float64(fi.Size())/1e6, "MB-unpacked")
		b.ReportMetric(float64(it.Size)/1e6, "MB-entry")
	})
	b.Run("RestoreNow", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			evict()
			b.StartTimer()
			if !bld.RestoreNow(ctx, "tool", rec, target) {
				b.Fatal("not restored")
			}
		}
	})
}
