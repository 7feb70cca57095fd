package runner

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A captured answer past CaptureMemory waits in an anonymous temp file,
// not in memory, and comes back whole, in order.
func TestCaptureSpillsPastMemory(t *testing.T) {
	spill := t.TempDir()
	// Twice CaptureMemory of numbered lines, so order and completeness show.
	script := writeScript(t, `i=0; while [ $i -lt 150000 ]; do i=$((i+1)); echo "line $i of a long answer, padded out to be long enough"; done`)
	r := run(t, context.Background(), Spec{Path: script, Capture: true, SpillDir: spill})
	defer r.Stdout.Close()
	if r.Outcome != Exited || r.Status() != 0 {
		t.Fatalf("got %v status %d", r.Outcome, r.Status())
	}
	if r.StdoutN < 2*CaptureMemory || r.Stdout.Len() != r.StdoutN {
		t.Fatalf("printed %d bytes, captured %d", r.StdoutN, r.Stdout.Len())
	}
	if len(r.Stdout.mem) > CaptureMemory || r.Stdout.file == nil || len(r.Stdout.tail) != 0 {
		t.Fatalf("in memory %d bytes, file %v, tail %d", len(r.Stdout.mem), r.Stdout.file, len(r.Stdout.tail))
	}
	if _, whole := r.Stdout.Bytes(); whole {
		t.Fatal("Bytes says a spilled output is whole in memory")
	}
	left, err := os.ReadDir(spill)
	if err != nil || len(left) != 0 {
		t.Fatalf("the spill folder holds %v (%v): the file must have no name", left, err)
	}
	var got bytes.Buffer
	if _, err := r.Stdout.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	if int64(got.Len()) != r.StdoutN || len(lines) != 150000 || lines[0] != "line 1 of a long answer, padded out to be long enough" ||
		lines[149999] != "line 150000 of a long answer, padded out to be long enough" {
		t.Fatalf("replayed %d bytes, %d lines, want %d bytes", got.Len(), len(lines), r.StdoutN)
	}
	// The file can be replayed again (a second writer).
	got.Reset()
	if n, err := r.Stdout.WriteTo(&got); err != nil || n != r.StdoutN {
		t.Fatalf("second replay: %d bytes, %v", n, err)
	}
}

// Without a spill folder only the start is kept (a live answer whose copy
// is for the cache), and replaying it says so.
func TestCaptureWithoutSpillKeepsTheStart(t *testing.T) {
	o := newOutput("")
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range 5 {
		o.Write(chunk)
	}
	if o.Len() != 5<<20 || len(o.mem) != CaptureMemory {
		t.Fatalf("len %d, in memory %d", o.Len(), len(o.mem))
	}
	if _, err := o.WriteTo(&bytes.Buffer{}); err != errDropped {
		t.Fatalf("WriteTo = %v, want errDropped", err)
	}
}

// A spill folder guard cannot write keeps the output in memory: an answer
// is never lost.
func TestCaptureSpillFailureKeepsMemory(t *testing.T) {
	dir := t.TempDir()
	blocked := filepath.Join(dir, "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := newOutput(filepath.Join(blocked, "spill")) // a folder below a file
	want := bytes.Repeat([]byte("0123456789"), CaptureMemory/10+1000)
	o.Write(want[:CaptureMemory-5])
	o.Write(want[CaptureMemory-5:])
	var got bytes.Buffer
	if _, err := o.WriteTo(&got); err != nil || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("replayed %d bytes (%v), want %d", got.Len(), err, len(want))
	}
}

func TestOutputNilAndFixed(t *testing.T) {
	var o *Output
	if o.Len() != 0 || o.Close() != nil {
		t.Fatal("nil Output is not empty")
	}
	if b, whole := o.Bytes(); len(b) != 0 || !whole {
		t.Fatal("nil Output has bytes")
	}
	f := NewOutput([]byte("answer\n"))
	var got bytes.Buffer
	if n, err := f.WriteTo(&got); err != nil || n != 7 || got.String() != "answer\n" {
		t.Fatalf("NewOutput replays %q (%d, %v)", got.String(), n, err)
	}
}

// EndsWith sees the output's last bytes however they were written: in one
// piece, a byte at a time, or past the part kept in memory.
func TestOutputEndsWith(t *testing.T) {
	for _, writes := range [][]string{
		{"answer\n\n"},
		{"a", "n", "s", "w", "e", "r", "\n", "\n"},
		{"answer\n", "\n"},
	} {
		o := newOutput("")
		for _, w := range writes {
			o.Write([]byte(w))
		}
		if !o.EndsWith("\n\n") || o.EndsWith("r\n\n\n") {
			t.Errorf("%q: EndsWith wrong (end %q)", writes, o.end)
		}
	}
	o := newOutput(t.TempDir())
	o.Write(make([]byte, CaptureMemory+10))
	o.Write([]byte("cut"))
	if o.EndsWith("\n") || !o.EndsWith("\x00cut") {
		t.Errorf("spilled output: end %q", o.end)
	}
	o.Close()
	if !NewOutput([]byte("x\n\n")).EndsWith("\n\n") || (*Output)(nil).EndsWith("") {
		t.Error("NewOutput or a nil Output")
	}
}

// Write reports every byte written as written, whether kept in memory or
// spilled: a short count with a nil error breaks io.Copy (short write).
func TestOutputWriteIsNeverShort(t *testing.T) {
	o := newOutput(t.TempDir())
	defer o.Close()
	o.Write(make([]byte, CaptureMemory-10))
	if n, err := o.Write(make([]byte, 100)); n != 100 || err != nil {
		t.Fatalf("Write across the memory limit = %d, %v", n, err)
	}
	if n, err := io.Copy(o, bytes.NewReader(make([]byte, 1000))); n != 1000 || err != nil {
		t.Fatalf("io.Copy = %d, %v", n, err)
	}
	if o.Len() != CaptureMemory-10+100+1000 {
		t.Errorf("Len %d", o.Len())
	}
}
