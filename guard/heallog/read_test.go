package heallog_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
)

// line is one heal event as the log holds it, at minute i of 2026-01-01.
func line(i int, event string) string {
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	return fmt.Sprintf("{\"level\":\"info\",\"ts\":%q,\"event\":%q,\"tool\":\"t%d\"}\n", ts.Format(time.RFC3339Nano), event, i)
}

func writeLog(t testing.TB, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

func events(recs []heallog.Record) string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Event+"/"+r.Tool)
	}
	return strings.Join(out, " ")
}

// Events written after a line longer than any event (a tool's output
// landed in the log, a torn write without its newline) are still read: the
// log is read from its end, and the long line is skipped, not the rest.
func TestReadPastAnOverlongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "selfheal.log")
	writeLog(t, path, line(1, "before"), strings.Repeat("x", 3<<20)+"\n", line(2, "after"), line(3, "last"))
	recs, err := heallog.Read(path, 10, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := events(recs); got != "before/t1 after/t2 last/t3" {
		t.Fatalf("read %q", got)
	}
}

// A log whose start is a gigabyte of nothing (a sparse file: a hole costs
// no disk) still gives its last events at once: only its end is read.
func TestReadOnlyTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "selfheal.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(line(1, "a")+line(2, "b")+line(3, "c")), 1<<30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	recs, err := heallog.Read(path, 2, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := events(recs); got != "b/t2 c/t3" {
		t.Fatalf("read %q", got)
	}
}

// The last N come from FILE and, when FILE has fewer, from FILE.1; --since
// stops at the first older event; a torn last line and garbage are skipped.
func TestReadAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "selfheal.log")
	var old []string
	for i := range 5000 { // several blocks
		old = append(old, line(i, "old"))
	}
	writeLog(t, path+".1", old...)
	writeLog(t, path, "not json\n", line(6000, "new"), "{\"ts\":1}\n", line(6001, "new"), "{\"event\":\"torn")
	for _, tt := range []struct {
		n     int
		since time.Time
		want  string
	}{
		{2, time.Time{}, "new/t6000 new/t6001"},
		{4, time.Time{}, "old/t4998 old/t4999 new/t6000 new/t6001"},
		{0, time.Date(2026, 1, 4, 11, 18, 0, 0, time.UTC), "old/t4998 old/t4999 new/t6000 new/t6001"},
		{10, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), "new/t6000 new/t6001"},
		{10, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), ""},
	} {
		recs, err := heallog.Read(path, tt.n, tt.since)
		if err != nil {
			t.Fatal(err)
		}
		if got := events(recs); got != tt.want {
			t.Errorf("Read(n=%d, since=%v) = %q, want %q", tt.n, tt.since, got, tt.want)
		}
	}
	all, _ := heallog.Read(path, 0, time.Time{})
	if len(all) != 5002 || all[0].Tool != "t0" || all[5001].Tool != "t6001" {
		t.Fatalf("all: %d events, first %+v", len(all), all[0])
	}
}

// A log that is a FIFO (anyone can mkfifo /tmp/selfheal.log) or a device is
// refused at once, never waited on or read without end.
func TestReadRefusesAFIFOAndADevice(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "selfheal.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			_, err := heallog.Read(path, 10, time.Time{})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Read(%s) = %v, want a not-a-regular-file error", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s) hangs", path)
		}
	}
}

func TestReadSkipsGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "selfheal.log")
	writeLog(t, path, "not json\n{\"event\":\"cache.hit\",\"ts\":\"2026-01-02T03:04:05Z\"}\r\n{\"ts\":1}\n\n{\"event\":\n")
	recs, err := heallog.Read(path, 0, time.Time{})
	if err != nil || len(recs) != 1 || recs[0].Event != "cache.hit" {
		t.Fatalf("%+v %v", recs, err)
	}
}

// FuzzRead reads arbitrary bytes as a log: never a record without an
// event, never more than asked, the same events forwards as the lines hold.
func FuzzRead(f *testing.F) {
	f.Add([]byte("{\"event\":\"x\"}\n"), 3)
	f.Add([]byte("\x00\xff{\n"), 0)
	f.Add([]byte(line(1, "a")+"\n\n"+line(2, "b")), 1)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		path := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		n = max(n, 0) % 50
		recs, err := heallog.Read(path, n, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && len(recs) > n {
			t.Fatalf("%d records, asked for %d", len(recs), n)
		}
		all, _ := heallog.Read(path, 0, time.Time{})
		if n > 0 && len(all) >= n && events(recs) != events(all[len(all)-n:]) {
			t.Fatalf("the last %d are %q, but all are %q", n, events(recs), events(all))
		}
		for _, r := range recs {
			if r.Event == "" {
				t.Fatal("record without event")
			}
		}
		if bytes.Count(data, []byte("\n"))+1 < len(all) {
			t.Fatal("more records than lines")
		}
	})
}

// TestReadForKeepsOneInstall: ReadFor keeps the events of one install, n
// counting those, and counts what it passed over: other installs' events
// and unmarked ones.
func TestReadForKeepsOneInstall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "selfheal.log")
	mine, theirs := heallog.New(path, nil), heallog.New(path, nil)
	mine.Install, theirs.Install = "/home/a/.cache/guard", "/home/b/.cache/guard"
	theirs.Detached = true
	mine.Write(heallog.Event{Event: "shim.recreate", Tool: "a1"})
	theirs.Write(heallog.Event{Event: "model.download", Tool: "b1", Result: "failed"})
	mine.Write(heallog.Event{Event: "shim.recreate", Tool: "a2"})
	theirs.Write(heallog.Event{Event: "model.download", Tool: "b2", Result: "failed"})
	mine.Close()
	theirs.Close()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"level":"info","ts":"2025-01-01T00:00:00Z","event":"timeout","tool":"old"}` + "\n")
	f.Close()

	recs, others, err := heallog.ReadFor(path, 0, time.Time{}, mine.Install)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Tool != "a1" || recs[1].Tool != "a2" || others != 3 {
		t.Fatalf("ReadFor = %+v, %d others; want a1, a2 and 3 others", recs, others)
	}
	if recs[0].Install != mine.Install || recs[0].Detached {
		t.Errorf("record %+v: want install %s, not detached", recs[0], mine.Install)
	}
	recs, others, _ = heallog.ReadFor(path, 1, time.Time{}, mine.Install)
	if len(recs) != 1 || recs[0].Tool != "a2" || others != 2 {
		t.Errorf("ReadFor n=1 = %+v, %d others; want a2 and the 2 events after it", recs, others)
	}
	recs, _, _ = heallog.ReadFor(path, 0, time.Time{}, theirs.Install)
	if len(recs) != 2 || !recs[0].Detached {
		t.Errorf("the other install's events %+v: want b1, b2, detached", recs)
	}
	all, _ := heallog.Read(path, 0, time.Time{})
	if len(all) != 5 {
		t.Errorf("Read = %d events, want all 5", len(all))
	}
}

// foreignLog writes size bytes of another install's events, as guard
// writes them, into path.
func foreignLog(t *testing.T, path string, size int) {
	t.Helper()
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
		fmt.Fprintf(&b, `{"level":"info","ts":%q,"event":"binary.rebuild","tool":"llama-completion","result":"ok","duration_ms":1200,"install":"/home/other/.cache/guard"}`+"\n", ts.Format(time.RFC3339Nano))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadBoundedStopsAtItsBound: a log (and .1) of another install's
// events alone is read no further than the bound, which it says it met;
// this install's events at the end are found after a few bytes; a log
// within the bound is read whole, and not said to be cut.
func TestReadBoundedStopsAtItsBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "selfheal.log")
	foreignLog(t, path, 3<<20)
	foreignLog(t, path+".1", 3<<20)
	const bound = 1 << 20
	sc, err := heallog.ReadBounded(path, 10, time.Time{}, "/home/me/.cache/guard", bound)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Read > bound || sc.Read < bound/2 || !sc.OlderNotRead || len(sc.Records) != 0 || sc.Others < 1000 {
		t.Fatalf("a foreign log: read %d bytes (bound %d), older not read %v, %d records, %d others", sc.Read, bound, sc.OlderNotRead, len(sc.Records), sc.Others)
	}

	mine := heallog.New(path, nil)
	mine.Install = "/home/me/.cache/guard"
	for i := 0; i < 3; i++ {
		mine.Write(heallog.Event{Event: "shim.recreate", Tool: fmt.Sprint("t", i)})
	}
	mine.Close()
	sc, err = heallog.ReadBounded(path, 3, time.Time{}, mine.Install, bound)
	if err != nil || len(sc.Records) != 3 || sc.Records[2].Tool != "t2" || sc.OlderNotRead || sc.Read > 64<<10 {
		t.Fatalf("this install's events at the end: %+v, read %d, older not read %v, %v", sc.Records, sc.Read, sc.OlderNotRead, err)
	}

	small := filepath.Join(dir, "small.log")
	foreignLog(t, small, 100<<10)
	sc, err = heallog.ReadBounded(small, 10, time.Time{}, mine.Install, bound)
	fi, _ := os.Stat(small)
	if err != nil || sc.OlderNotRead || sc.Read != fi.Size() {
		t.Fatalf("a log within the bound: read %d of %d, older not read %v, %v", sc.Read, fi.Size(), sc.OlderNotRead, err)
	}
	// since still stops the read at an older event of another install.
	sc, _ = heallog.ReadBounded(path, 0, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(1000*time.Hour), mine.Install, 0)
	if len(sc.Records) != 3 || sc.Read > 64<<10 {
		t.Fatalf("since past the foreign events: %d records, read %d", len(sc.Records), sc.Read)
	}
}
