package units

import "strings"

// OneLine is err's message on one line, its line breaks made "; ": where
// guard quotes an error inside a line of its own (a heal event's reason,
// a "guard: ..." message), a multi-line error must not break that line.
func OneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// LastLine is the last non-blank line of b (lines end in \n or \r),
// trimmed: what a build's output or a log says last.
func LastLine(b []byte) string {
	lines := strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			return s
		}
	}
	return ""
}
