package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// CaptureMemory is how much of a run's stdout Capture keeps in memory; the
// rest goes to a private temp file (Spec.SpillDir), or is only counted.
// An answer of 200 MB must not cost guard 200 MB of memory.
const CaptureMemory = 4 << 20

// Output is a run's captured stdout: its first CaptureMemory bytes in
// memory, the rest in a temp file that has no name (removed as soon as it
// was opened, so nothing is left behind whatever happens to guard). The
// zero value and nil are empty. Close it when done.
type Output struct {
	mem  []byte
	file *os.File // the spilled part
	tail []byte   // what came after a spill that failed: kept in memory
	n    int64    // bytes written
	dir  string   // where to spill; "" keeps only mem, and drops the rest
	end  []byte   // the last bytes written, at most endBytes
}

// endBytes is how much of the output's end EndsWith can look at.
const endBytes = 8

// NewOutput returns an Output holding b, as a run that printed b would
// leave it (for callers that replay or fake a run).
func NewOutput(b []byte) *Output {
	o := &Output{mem: b, n: int64(len(b))}
	o.keepEnd(b)
	return o
}

func newOutput(spillDir string) *Output { return &Output{dir: spillDir} }

// Write keeps p. It never fails: output that cannot be spilled stays in
// memory rather than being lost.
func (o *Output) Write(p []byte) (int, error) {
	size := len(p)
	o.n += int64(size)
	o.keepEnd(p)
	if room := CaptureMemory - len(o.mem); room > 0 {
		k := min(room, len(p))
		o.mem = append(o.mem, p[:k]...)
		p = p[k:]
	}
	switch {
	case len(p) == 0 || o.dir == "":
		// All of p fit in mem, or there is nowhere to spill the rest: it is
		// only counted, and WriteTo says so.
	case o.tail != nil:
		o.tail = append(o.tail, p...)
	default:
		if o.file == nil {
			f, err := spillFile(o.dir)
			if err != nil {
				o.tail = append(o.tail, p...)
				break
			}
			o.file = f
		}
		if n, err := o.file.Write(p); err != nil {
			o.tail = append(o.tail, p[n:]...)
		}
	}
	return size, nil // all of p is kept, in memory or spilled: never a short write
}

// spillFile creates an anonymous file below dir: created exclusively, mode
// 0600, in a private folder of its own, and both removed at once, so the
// file lives only as long as guard holds it open.
func spillFile(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(dir, ".spill-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(private)
	f, err := os.CreateTemp(private, "stdout-")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// keepEnd keeps the last endBytes of everything written so far.
func (o *Output) keepEnd(p []byte) {
	if len(p) >= endBytes {
		o.end = append(o.end[:0], p[len(p)-endBytes:]...)
		return
	}
	o.end = append(o.end, p...)
	if extra := len(o.end) - endBytes; extra > 0 {
		o.end = append(o.end[:0], o.end[extra:]...)
	}
}

// EndsWith reports whether the output ends with suffix (of at most 8
// bytes), however much of it was spilled.
func (o *Output) EndsWith(suffix string) bool {
	return o != nil && len(suffix) <= endBytes && strings.HasSuffix(string(o.end), suffix)
}

// Len is how many bytes the run printed.
func (o *Output) Len() int64 {
	if o == nil {
		return 0
	}
	return o.n
}

// Bytes returns the whole output when it is held in memory (at most
// CaptureMemory bytes); false when it is larger.
func (o *Output) Bytes() ([]byte, bool) {
	if o == nil {
		return nil, true
	}
	return o.mem, int64(len(o.mem)) == o.n
}

// errDropped is WriteTo's error for an output of which only the start was
// kept.
var errDropped = errors.New("only the start of the output was kept")

// WriteTo writes the whole output to w, the spilled part straight from its
// file (copy_file_range or sendfile when w is a file).
func (o *Output) WriteTo(w io.Writer) (int64, error) {
	if o == nil {
		return 0, nil
	}
	n, err := w.Write(o.mem)
	total := int64(n)
	if err != nil {
		return total, err
	}
	if o.file != nil {
		if _, err := o.file.Seek(0, io.SeekStart); err != nil {
			return total, fmt.Errorf("read spilled output: %w", err)
		}
		k, err := io.Copy(w, o.file)
		total += k
		if err != nil {
			return total, err
		}
	}
	n, err = w.Write(o.tail)
	total += int64(n)
	if err == nil && o.dir == "" && o.n > int64(len(o.mem)) { // bytes past mem, nowhere to spill them
		err = errDropped
	}
	return total, err
}

// Close releases the spilled file, if any.
func (o *Output) Close() error {
	if o == nil || o.file == nil {
		return nil
	}
	err := o.file.Close()
	o.file = nil
	return err
}
