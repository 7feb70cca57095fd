package runner

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
)

// promptKind classifies the question a tool is waiting on.
type promptKind uint8

const (
	noPrompt promptKind = iota
	yesNoPrompt
	passwordPrompt
	inquirerPrompt
	// replPrompt is a bare ">" line: llama.cpp's conversation prompt, and
	// node's or python's REPL. Nothing guard could type is the right answer,
	// so it is never answered, only ended.
	replPrompt
)

// The patterns compile on first use, not at package init: a shim call that
// execs its tool never watches for prompts and must not pay for them.
var (
	// Secrets are never answered: the prompt word, then the line ends in
	// ':' or '?' ("Password:", "[sudo] password for bob:",
	// "Enter passphrase for key '/root/.ssh/id_ed25519':").
	passwordRe = lazyRegexp(`(?i)(password|passphrase)[^\n]*[:?]\s*$`)
	// Inquirer, enquirer and prompts draw "? question › default" and redraw
	// on every key, so a typed answer would not mean what it seems to.
	inquirerRe = lazyRegexp(`^\s*\?\s+\S.*[›❯]`)
	// Questions that take y (or yes) and a newline. Only at the end of the
	// line: the tool printed the question and is waiting.
	yesNoRe = lazyRegexp(`(?i)(\(y\)|\(y/n\)|\[y/n\]|\(yes/no[^)]*\)|\[yes/no\])\s*[:?]?\s*$`)
	// "(yes/no)" questions (ssh host keys, terraform) reject a bare y.
	yesWordRe = lazyRegexp(`(?i)[(\[]yes/no`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// detectPrompt looks at the unfinished last line of tail, the end of the
// output, and returns the prompt it shows, if any.
func detectPrompt(tail []byte) (string, promptKind) {
	line := promptLine(tail)
	switch {
	case line == "":
		return "", noPrompt
	case passwordRe().MatchString(line):
		return line, passwordPrompt
	case inquirerRe().MatchString(line):
		return line, inquirerPrompt
	case yesNoRe().MatchString(line):
		return line, yesNoPrompt
	case line == ">" || line == ">>>":
		return line, replPrompt
	}
	return "", noPrompt
}

// yesReply is the answer to a yes/no prompt; enter is what the Enter key sends
// on the child's stdin ("\n" on a pipe, "\r" on a terminal).
func yesReply(prompt, enter string) string {
	if yesWordRe().MatchString(prompt) {
		return "yes" + enter
	}
	return "y" + enter
}

// promptLine returns the text of the unfinished last line as a terminal would
// show it, roughly: escape sequences removed, and after a carriage return the
// last text drawn. A tool that ends its question with a newline is not
// waiting at a prompt the way a reading tool is, so a finished last line
// gives "".
func promptLine(tail []byte) string {
	if i := bytes.LastIndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:]
	}
	line := stripControl(tail)
	if i := strings.LastIndexByte(strings.TrimRight(line, " \r"), '\r'); i >= 0 {
		line = line[i+1:]
	}
	return strings.TrimSpace(strings.ReplaceAll(line, "\r", ""))
}

// stripControl removes ANSI escape sequences (CSI, OSC, two-byte ESC x) and
// control characters other than '\r' and '\t'. Invalid UTF-8 passes through
// as is; the result is only matched, never written.
func stripControl(p []byte) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0x1b:
			i = skipEscape(p, i)
		case c == '\r' || c == '\t':
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// skipEscape returns the index of the last byte of the escape sequence that
// starts at p[i] (an ESC).
func skipEscape(p []byte, i int) int {
	if i+1 >= len(p) {
		return i
	}
	switch p[i+1] {
	case '[':
		for j := i + 2; j < len(p); j++ {
			if p[j] >= 0x40 && p[j] <= 0x7e {
				return j
			}
		}
		return len(p) - 1
	case ']':
		for j := i + 2; j < len(p); j++ {
			if p[j] == 0x07 {
				return j
			}
			if p[j] == 0x1b && j+1 < len(p) && p[j+1] == '\\' {
				return j + 1
			}
		}
		return len(p) - 1
	case '(', ')', '*', '+', '#', '%':
		return min(i+2, len(p)-1)
	}
	return i + 1
}
