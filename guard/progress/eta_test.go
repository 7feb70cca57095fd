package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A download that waits out a retry back-off must not show an ETA that
// climbs while nothing moves: the wait shows why instead, and the next
// attempt's rate counts only its own time.
func TestETADuringRetryBackoff(t *testing.T) {
	r := Start(&bytes.Buffer{}, "downloading m.gguf", 1000, time.Hour)
	defer r.Stop("")
	r.Add(400)
	r.mu.Lock()
	r.start = r.start.Add(-10 * time.Second) // 400 bytes in 10 s, then a drop
	r.mu.Unlock()
	r.Wait("retrying in 4s")
	line := r.Line()
	if strings.Contains(line, "eta") || strings.Contains(line, "MB/s") || !strings.HasSuffix(line, ": retrying in 4s") {
		t.Fatalf("line while waiting: %q", line)
	}
	r.SetBase(400) // the next attempt resumes at byte 400
	r.Add(100)
	line = r.Line()
	if strings.Contains(line, "retrying") {
		t.Fatalf("still waiting after the next attempt began: %q", line)
	}
	// 100 bytes in no time at all: the ETA is about nothing, not the 50 s
	// that 500 bytes over the whole 10 s would give.
	if !strings.Contains(line, " eta 0s") {
		t.Fatalf("line after the resume: %q", line)
	}
}
