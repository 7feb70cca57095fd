package fetch

import (
	"encoding/json"
	"testing"

	"github.com/sandbox-guard/guard/guard/models/fetch/ranged"
)

// A record guard would never write is not resumed (issue 36): parts
// outside what partSize makes, or of another size than a test asked for.
func TestMadeHere(t *testing.T) {
	const size = 512 << 20
	for _, tt := range []struct {
		name       string
		part, want int64 // the record's parts, the request's PartSize
		ok         bool
	}{
		// Tiny parts over a small file: a record of 512 MiB in one-byte
		// parts would hold half a billion of them, and the test would
		// spend minutes making it.
		{"64-byte parts", 64, 0, false},
		{"one byte", 1, 0, false},
		{"just under 4 MiB", minPart - 1, 0, false},
		{"4 MiB", minPart, 0, true},
		{"16 MiB", 16 << 20, 0, true},
		{"64 MiB", maxPart, 0, true},
		{"just over 64 MiB", maxPart + 1, 0, false},
		{"the whole file", size, 0, false},
		{"what a test asked for", 64 << 10, 64 << 10, true},
		{"not what a test asked for", 128 << 10, 64 << 10, false},
		{"4 MiB when a test asked for 64 KiB", minPart, 64 << 10, false},
	} {
		size := int64(size)
		if tt.part < 4<<10 {
			size = 64 << 10
		}
		rec := ranged.NewRecord(size, tt.part)
		if err := rec.Valid(size); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if err := madeHere(rec, tt.want); (err == nil) != tt.ok {
			t.Errorf("%s: madeHere = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}

// Whatever a record says, one that is valid and made here asks for at most
// one request per minPart bytes of the file: no planted grid makes a
// download crawl.
func FuzzMadeHere(f *testing.F) {
	for _, r := range []ranged.Record{
		ranged.NewRecord(1<<20, 64),
		ranged.NewRecord(512<<20, 16<<20),
		ranged.NewRecord(100<<20, maxPart),
		ranged.NewRecord(10, 4),
	} {
		b, _ := json.Marshal(r)
		f.Add(b, int64(r.Size))
	}
	f.Fuzz(func(t *testing.T, data []byte, size int64) {
		var rec ranged.Record
		if json.Unmarshal(data, &rec) != nil || rec.Valid(size) != nil || madeHere(rec, 0) != nil {
			return
		}
		if parts := int64(len(rec.Done)); parts > size/minPart+1 {
			t.Errorf("a record of %d bytes in %d parts of %d passed", size, parts, rec.Part)
		}
	})
}
