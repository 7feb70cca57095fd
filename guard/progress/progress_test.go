package progress_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/progress"
)

func TestPlainLinesWhenNotATerminal(t *testing.T) {
	t.Parallel()
	var out guardtest.Buffer
	r := progress.Start(&out, "downloading m.gguf", 1000, progress.Pace{Every: 20 * time.Millisecond})
	r.Add(500)
	time.Sleep(120 * time.Millisecond)
	r.Stop("guard: done")
	s := out.String()
	if strings.Contains(s, "\r") {
		t.Fatalf("carriage return on a pipe: %q", s)
	}
	if !strings.Contains(s, "guard: downloading m.gguf  50%") || !strings.HasSuffix(s, "guard: done\n") {
		t.Fatalf("output %q", s)
	}
}

func TestStatusLine(t *testing.T) {
	t.Parallel()
	r := progress.Start(&bytes.Buffer{}, "building llama-cpp", 0, progress.Pace{})
	r.SetStatus("step 2/2\r")
	line := r.Line()
	r.Stop("")
	if !strings.HasPrefix(line, "guard: building llama-cpp (") || !strings.HasSuffix(line, ": step 2/2") {
		t.Fatalf("line %q", line)
	}
}
