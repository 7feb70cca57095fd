package commands

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// printable is s as a table cell: unchanged when every character prints,
// else Go-quoted ("evil\nname"), so that a newline or an escape sequence in
// a name from the manifest or a line of the log can neither add a row nor
// reach the terminal.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r != ' ' && !strconv.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}

// took writes how long something took as a person reads it: tenths of a
// second below a minute, whole seconds above.
func took(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// sortedKeys returns a map's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// lastBuilt says what a recipe's rebuild cost last time, or that it never
// ran to a good end here.
func lastBuilt(b BuildState) string {
	if b.BuildMS > 0 {
		return "last built in " + took(time.Duration(b.BuildMS)*time.Millisecond)
	}
	return "never built here"
}

// sourceText says whether a recipe's source folder is there, and where a
// heal would clone it from when it is not.
func sourceText(b BuildState) string {
	switch {
	case b.DirExists:
		return "source present"
	case b.Repo != "":
		return "source missing (cloned from " + printable(b.Repo) + ")"
	}
	return "source missing"
}

// condition says, for one line, a heal in the background that is not
// running as it should: "" for a running one.
func condition(h HealingState) string {
	switch h.State {
	case healStopped:
		return "stopped (SIGSTOP): kill -CONT " + strconv.Itoa(h.PID) + " continues it"
	case healStuck:
		return "stuck: its record was last updated " + took(time.Since(h.Updated)) + " ago, past its own limit"
	}
	return ""
}
