package verify_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/verify"
)

// BenchmarkQuick compares the per-call check on a 1 KB file and on a 2 GB
// sparse file, both pinned and stamped. The two figures should be about
// the same: Quick never reads past the header.
func BenchmarkQuick(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int64
	}{{"1KB", 1 << 10}, {"2GB", 2 << 30}} {
		b.Run(size.name, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "m.gguf")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.Write(guardtest.GGUF(64)); err != nil {
				b.Fatal(err)
			}
			if err := f.Truncate(size.n); err != nil { // sparse: no disk used
				b.Fatal(err)
			}
			f.Close()
			stamps := filepath.Join(dir, "stamps")
			const pin = "0000000000000000000000000000000000000000000000000000000000000000"
			if err := verify.WriteStamp(stamps, path, pin, "manifest"); err != nil {
				b.Fatal(err)
			}
			spec := verify.Spec{Path: path, Size: size.n, SHA256: pin}
			b.ReportAllocs()
			for b.Loop() {
				if st := verify.Quick(spec, stamps); st != verify.OK {
					b.Fatalf("Quick = %s", st)
				}
			}
		})
	}
}

func BenchmarkSum(b *testing.B) {
	path := filepath.Join(b.TempDir(), "m.gguf")
	guardtest.WriteGGUF(b, path, 64<<20)
	b.SetBytes(64 << 20)
	for b.Loop() {
		if _, err := verify.Sum(path); err != nil {
			b.Fatal(err)
		}
	}
}
