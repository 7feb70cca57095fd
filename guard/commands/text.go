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
