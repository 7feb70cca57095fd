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
// the same: Quick never reads past the header. The unpinned rows are the
// default manifest's models: with no stamp (never verified), and with a
// stamp saying the Hub declared its sha256.
func BenchmarkQuick(b *testing.B) {
	benchCheck(b, verify.Quick, verify.OK)
}

// BenchmarkUsable is BenchmarkQuick for the check a call makes, which
// reads no stamp for an unpinned model: its unpinned-declared row costs
// what the unpinned-nostamp row does.
func BenchmarkUsable(b *testing.B) {
	benchCheck(b, verify.Usable, verify.Unverified)
}

// benchCheck runs check over BenchmarkQuick's files; declared is what it
// answers for the unpinned file with a declared stamp.
func benchCheck(b *testing.B, check func(verify.Spec, string) verify.Status, declared verify.Status) {
	for _, size := range []struct {
		name string
		n    int64
		pin  string // "" = none
		by   string // the stamp's declared_by; "-" = no stamp
	}{
		{"1KB", 1 << 10, pin, "manifest"},
		{"2GB", 2 << 30, pin, "manifest"},
		{"1KB-unpinned-nostamp", 1 << 10, "", "-"},
		{"1KB-unpinned-declared", 1 << 10, "", "https://huggingface.co/o/m/resolve/main/m.gguf"},
	} {
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
			want := verify.OK
			if size.by == "-" {
				want = verify.Unverified
			} else if err := verify.WriteStamp(stamps, path, pin, size.by); err != nil {
				b.Fatal(err)
			}
			if size.pin == "" && size.by != "-" {
				want = declared
			}
			spec := verify.Spec{Path: path, Size: size.n, SHA256: size.pin}
			b.ReportAllocs()
			for b.Loop() {
				if st := check(spec, stamps); st != want {
					b.Fatalf("check = %s, want %s", st, want)
				}
			}
		})
	}
}

const pin = "0000000000000000000000000000000000000000000000000000000000000000"

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
