package heallog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
)

// BenchmarkRead is what `guard status` pays for its heal events: the last 10
// of a 1 KB log against those of a 100 MB log with a full rotated .1 (issue
// 14's case: 4.5 s and 623 MB when every line was parsed). The goal is the
// same cost for both, so the bytes allocated per read are reported too.
//
//	go test -run XXX -bench Read -benchmem ./guard/heallog
func BenchmarkRead(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"log=1KB", 1 << 10}, {"log=100MB+.1", 100 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "selfheal.log")
			body := logOf(bc.size)
			if err := os.WriteFile(path, body, 0o600); err != nil {
				b.Fatal(err)
			}
			if bc.size > 1<<20 {
				if err := os.WriteFile(path+".1", body, 0o600); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				recs, err := heallog.Read(path, 10, time.Time{})
				if err != nil || len(recs) != 10 {
					b.Fatalf("%d events, %v", len(recs), err)
				}
			}
		})
	}
}

// logOf is a heal log of about size bytes of real-looking events.
func logOf(size int) []byte {
	var buf bytes.Buffer
	for i := 0; buf.Len() < size; i++ {
		buf.WriteString(line(i%100000, "model.download"))
	}
	return buf.Bytes()
}

// BenchmarkReadForeign is `guard status` on a shared log none of whose
// events are this install's: the read stops at its bound (4 MiB, as
// status reads), so a 100 MB log with a full .1 costs what 4 MiB does.
//
//	go test -run XXX -bench ReadForeign -benchmem ./guard/heallog
func BenchmarkReadForeign(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "selfheal.log")
	var buf bytes.Buffer
	for i := 0; buf.Len() < 100<<20; i++ {
		ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		buf.WriteString(`{"level":"info","ts":"` + ts.Format(time.RFC3339Nano) + `","event":"binary.rebuild","tool":"llama-completion","result":"ok","install":"/home/other/.cache/guard"}` + "\n")
	}
	for _, p := range []string{path, path + ".1"} {
		if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	buf = bytes.Buffer{}
	b.ReportAllocs()
	for b.Loop() {
		sc, err := heallog.ReadBounded(path, 10, time.Time{}, "/home/me/.cache/guard", 4<<20)
		if err != nil || !sc.OlderNotRead {
			b.Fatalf("%+v %v", sc, err)
		}
	}
}
