package heallog_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandbox-guard/guard/guard/heallog"
)

// FuzzRoundTrip writes one event with arbitrary text in every string field
// (a reason is often a server's or a tool's own words: newlines, quotes,
// control bytes, broken UTF-8) and reads the log back: it must be exactly
// one line that Parse returns as the same event, so `guard status` never
// shows a torn or merged event. zap replaces each invalid UTF-8 byte with
// U+FFFD, which the comparison allows.
func FuzzRoundTrip(f *testing.F) {
	f.Add("model.download", "llama-completion", "/home/u/m.gguf", "404 not found: \"Entry not found\"\n<html>", "failed", int64(12), int64(-1), 3)
	f.Add("x", "", "", "\x00\xff\xfe\u2028\u2029\r\n", "", int64(0), int64(0), 0)
	f.Add("timeout", "npx", "a\tb", strings.Repeat("é", 300), "killed", int64(1<<62), int64(5), -1)
	f.Fuzz(func(t *testing.T, event, tool, target, reason, result string, dur, n int64, attempt int) {
		if event == "" {
			return // Parse skips a line without an event, by design
		}
		path := filepath.Join(t.TempDir(), "log")
		l := heallog.New(path, nil)
		l.Write(heallog.Event{Event: heallog.Name(event), Tool: tool, Target: target, Reason: reason, Result: result,
			DurationMS: dur, Bytes: n, Attempt: attempt, Level: "warn"})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(data, []byte("\n")) != 1 || !bytes.HasSuffix(data, []byte("\n")) {
			t.Fatalf("one event is not one line: %q", data)
		}
		recs, err := heallog.Read(path, 0, time.Time{})
		if err != nil || len(recs) != 1 {
			t.Fatalf("read back %d records (err %v) from %q", len(recs), err, data)
		}
		r := recs[0]
		if r.Event != valid(event) || r.Tool != valid(tool) || r.Target != valid(target) ||
			r.Reason != valid(reason) || r.Result != valid(result) || r.Level != "warn" ||
			r.DurationMS != dur || r.Bytes != n || r.Attempt != attempt {
			t.Fatalf("round trip changed the event:\n%q\n%+v", data, r)
		}
	})
}

// valid replaces each byte of invalid UTF-8 in s with U+FFFD, as zap does.
func valid(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}
