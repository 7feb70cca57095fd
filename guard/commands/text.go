package commands

import (
	"strconv"
	"strings"
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
