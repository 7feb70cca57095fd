package ranged

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

func data(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(b)
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func open(t *testing.T, size int64) (*os.File, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.OpenFile(filepath.Join(dir, "m.partial"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f, filepath.Join(dir, "m.partial.parts")
}

// fill writes every part through w connections at once, in pieces of
// piece bytes, and returns the tracker.
func fill(t *testing.T, tr *Tracker, want []byte, conns, piece int) {
	t.Helper()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for {
				c, ok := tr.Claim()
				if !ok {
					return
				}
				for c.Next < c.End {
					n := min(int64(piece), c.End-c.Next)
					if err := tr.Write(&c, want[c.Next:c.Next+n]); err != nil {
						t.Error(err)
						return
					}
				}
				tr.Release(c)
			}
		})
	}
	wg.Wait()
}

// The hash of the contiguous prefix, filled by parts in any order, is the
// sha256 of the whole file.
func TestSumOverPartsFilledInParallel(t *testing.T) {
	want := data(1<<20 + 12345)
	f, rp := open(t, int64(len(want)))
	rec := NewRecord(int64(len(want)), 64<<10)
	tr := New(f, rp, rec)
	defer tr.Close()
	fill(t, tr, want, 5, 7000)
	got, err := tr.Sum()
	if err != nil {
		t.Fatal(err)
	}
	if got != sum(want) {
		t.Fatalf("sum %s, want %s", got, sum(want))
	}
	disk, _ := os.ReadFile(f.Name())
	if !bytes.Equal(disk, want) {
		t.Fatal("file differs from what was written")
	}
}

// A saved record never counts a byte that is not in the file, and a
// tracker resumed from it continues each part where the record says.
func TestRecordNeverAheadOfTheFileAndResumes(t *testing.T) {
	want := data(600 << 10)
	size := int64(len(want))
	f, rp := open(t, size)
	rec := NewRecord(size, 100<<10)
	if err := Save(rp, rec); err != nil {
		t.Fatal(err)
	}
	tr := New(f, rp, rec)
	// Half of part 0, all of part 2, a third of part 5.
	write := func(idx int, n int64) {
		c := Chunk{Index: idx, Next: int64(idx) * rec.Part, End: min(int64(idx+1)*rec.Part, size)}
		if err := tr.Write(&c, want[c.Next:c.Next+n]); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 50<<10)
	write(2, 100<<10)
	write(5, 33<<10)
	if err := tr.Save(); err != nil {
		t.Fatal(err)
	}
	tr.Close()

	got, err := Load(rp)
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Valid(size); err != nil {
		t.Fatal(err)
	}
	disk, _ := os.ReadFile(f.Name())
	for i, d := range got.Done {
		start := int64(i) * got.Part
		if !bytes.Equal(disk[start:start+d], want[start:start+d]) {
			t.Fatalf("part %d: the record counts %d bytes the file does not hold", i, d)
		}
	}
	if got.Done[0] != 50<<10 || got.Done[2] != 100<<10 || got.Done[5] != 33<<10 || got.Bytes() != 183<<10 {
		t.Fatalf("record %v", got.Done)
	}

	tr = New(f, rp, got)
	defer tr.Close()
	var claimed []Chunk
	for {
		c, ok := tr.Claim()
		if !ok {
			break
		}
		claimed = append(claimed, c)
	}
	if len(claimed) != 5 { // part 2 is complete
		t.Fatalf("claimed %d parts, want 5: %+v", len(claimed), claimed)
	}
	if claimed[0].Index != 0 || claimed[0].Next != 50<<10 || claimed[4].Index != 5 || claimed[4].Next != 5*rec.Part+33<<10 {
		t.Fatalf("resume does not continue where the record says: %+v", claimed)
	}
	for _, c := range claimed {
		for c.Next < c.End {
			if err := tr.Write(&c, want[c.Next:min(c.Next+4096, c.End)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := tr.Sum()
	if err != nil || s != sum(want) {
		t.Fatalf("sum after resume %s %v, want %s", s, err, sum(want))
	}
}

func TestWritePastThePartIsRefused(t *testing.T) {
	f, rp := open(t, 100)
	tr := New(f, rp, NewRecord(100, 40))
	defer tr.Close()
	c, _ := tr.Claim()
	if err := tr.Write(&c, make([]byte, 41)); err != ErrPastPart {
		t.Fatalf("err %v, want ErrPastPart", err)
	}
}

func TestInvalidRecords(t *testing.T) {
	good := NewRecord(1000, 300)
	for name, r := range map[string]Record{
		"version":   {Version: 9, Size: 1000, Part: 300, Done: make([]int64, 4)},
		"size":      {Version: Version, Size: 999, Part: 300, Done: make([]int64, 4)},
		"parts":     {Version: Version, Size: 1000, Part: 300, Done: make([]int64, 3)},
		"part zero": {Version: Version, Size: 1000, Part: 0},
		"overfull":  {Version: Version, Size: 1000, Part: 300, Done: []int64{0, 0, 0, 101}},
		"negative":  {Version: Version, Size: 1000, Part: 300, Done: []int64{-1, 0, 0, 0}},
	} {
		if r.Valid(1000) == nil {
			t.Errorf("%s: %+v accepted", name, r)
		}
	}
	if err := good.Valid(1000); err != nil {
		t.Fatal(err)
	}
}

// The hash takes in the contiguous prefix while later parts are still
// missing: once the first parts are written it reaches their end without
// waiting for the rest, and never goes past a missing part.
func TestHashFollowsThePrefix(t *testing.T) {
	want := data(500 << 10)
	size := int64(len(want))
	f, rp := open(t, size)
	rec := NewRecord(size, 100<<10)
	tr := New(f, rp, rec)
	defer tr.Close()
	var parts []Chunk
	for {
		c, ok := tr.Claim()
		if !ok {
			break
		}
		parts = append(parts, c)
	}
	write := func(c Chunk) {
		for c.Next < c.End {
			if err := tr.Write(&c, want[c.Next:min(c.Next+10000, c.End)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Parts 0, 1 and 3: the prefix ends at part 2.
	write(parts[3])
	write(parts[0])
	write(parts[1])
	for tr.Hashed() < 2*rec.Part {
		time.Sleep(time.Millisecond) // the test's own timeout bounds a hash that never comes
	}
	if got := tr.Hashed(); got != 2*rec.Part {
		t.Fatalf("hashed %d bytes, want the %d of the prefix", got, 2*rec.Part)
	}
	write(parts[2])
	write(parts[4])
	s, err := tr.Sum()
	if err != nil || s != sum(want) {
		t.Fatalf("sum %s %v, want %s", s, err, sum(want))
	}
}

// The last save of a record finds room on a disk the writes filled: the
// room kept beside the record is given up for it, but only once no part is
// being written (a writer would take it first), and Close removes what is
// left of it.
func TestLastSaveOnAFullDisk(t *testing.T) {
	dir := guardtest.SmallDisk(t, "1m")
	const size, part = 256 << 10, 64 << 10
	want := data(size)
	f, err := os.OpenFile(filepath.Join(dir, "m.partial"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil { // sparse: the writes take the room
		t.Fatal(err)
	}
	path := filepath.Join(dir, "m.partial.parts")
	rec := NewRecord(size, part)
	if err := Save(path, rec); err != nil {
		t.Fatal(err)
	}
	tr := New(f, path, rec)
	defer tr.Close()
	if fi, err := os.Lstat(Room(path)); err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(roomFor(rec)) {
		t.Fatalf("room: %v, %v; want a file of %d bytes", fi, err, roomFor(rec))
	}

	// Half a part: less than a save is due after, so no periodic save
	// runs beside the test (its rename would free a block).
	c, _ := tr.Claim()
	if err := tr.Write(&c, want[:part/2]); err != nil {
		t.Fatal(err)
	}
	tr.Release(c)
	held, _ := tr.Claim() // a writer is at work on part 1
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	for {
		if _, err := filler.Write(make([]byte, 4096)); err != nil {
			if !noRoom(err) {
				t.Fatal(err)
			}
			break
		}
	}

	if err := tr.Save(); !noRoom(err) {
		t.Fatalf("save while part 1 is written: %v, want no space left (the room kept for later)", err)
	}
	if _, err := os.Lstat(Room(path)); err != nil {
		t.Fatalf("the room was given up while a part was written: %v", err)
	}
	tr.Release(held)
	if err := tr.Save(); err != nil {
		t.Fatalf("last save on the full disk: %v", err)
	}
	got, err := Load(path)
	if err != nil || got.Done[0] != part/2 || got.Bytes() != part/2 {
		t.Fatalf("record %+v, %v; want part 0's %d bytes", got, err, part/2)
	}
	if _, err := os.Lstat(Room(path)); !os.IsNotExist(err) {
		t.Errorf("room still there after it was used: %v", err)
	}
}

// The room is a file of the tracker's own: a link planted where it goes is
// removed, never written through, and Close removes the room.
func TestRoomIsNeverALink(t *testing.T) {
	f, path := open(t, 1<<20)
	outside := filepath.Join(t.TempDir(), "theirs")
	if err := os.WriteFile(outside, []byte("not guard's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, Room(path)); err != nil {
		t.Fatal(err)
	}
	tr := New(f, path, NewRecord(1<<20, 256<<10))
	if b, err := os.ReadFile(outside); err != nil || string(b) != "not guard's" {
		t.Fatalf("the link's target changed: %q, %v", b, err)
	}
	if fi, err := os.Lstat(Room(path)); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("room: %v, %v; want a regular file", fi, err)
	}
	tr.Close()
	if _, err := os.Lstat(Room(path)); !os.IsNotExist(err) {
		t.Errorf("room left after Close: %v", err)
	}
}
