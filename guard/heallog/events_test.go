package heallog_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/heallog"
)

// TestDocsListEveryEvent fails when the table of events in
// docs/exit-status-and-events.md ("Heal log events") and heallog.Events()
// differ: an event guard writes that the page does not explain, or a row
// for an event guard no longer writes (or a typo in either).
func TestDocsListEveryEvent(t *testing.T) {
	page := filepath.Join("..", "..", "docs", "exit-status-and-events.md")
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedEvents(t, string(data))
	declared := map[string]bool{}
	for _, n := range heallog.Events() {
		declared[string(n)] = true
		if !documented[string(n)] {
			t.Errorf("event %q is not in the table of %s; add a row saying when it is logged", n, page)
		}
	}
	for n := range documented {
		if !declared[n] {
			t.Errorf("%s lists event %q, which heallog does not declare; remove the row or add the constant", page, n)
		}
	}
}

// documentedEvents reads the names (in backquotes) of the first column of
// the table whose header is "event" in the page's "Heal log events" section.
func documentedEvents(t *testing.T, page string) map[string]bool {
	_, section, ok := strings.Cut(page, "\n## Heal log events\n")
	if !ok {
		t.Fatal(`no "## Heal log events" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := map[string]bool{}
	inTable := false
	code := regexp.MustCompile("`([^`]+)`")
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		switch {
		case len(cells) < 3:
			inTable = false
		case strings.TrimSpace(cells[1]) == "event":
			inTable = true
		case inTable && !strings.HasPrefix(strings.TrimSpace(cells[1]), "---"):
			for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
				names[m[1]] = true
			}
		}
	}
	if len(names) == 0 {
		t.Fatal(`no table with an "event" column in "Heal log events"`)
	}
	return names
}

// TestEventsAreDistinct guards the list itself: Events() holds each name
// once, none empty, each a lower-case dotted word as the log has always had.
func TestEventsAreDistinct(t *testing.T) {
	ev := heallog.Events()
	name := regexp.MustCompile(`^[a-z]+(\.[a-z]+)?$`)
	for i, n := range ev {
		if !name.MatchString(string(n)) {
			t.Errorf("event %q is not a lower-case dotted word", n)
		}
		if slices.Index(ev, n) != i {
			t.Errorf("event %q listed twice", n)
		}
	}
}
