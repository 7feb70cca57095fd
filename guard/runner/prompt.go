package runner

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Whether a tool waits for input is the kernel's word (waiting.go); the
// text only says what kind of question it waits at, and so what guard may
// answer.

// promptKind classifies the question a tool is waiting at.
type promptKind uint8

const (
	// noPrompt: the output does not end with an unfinished line.
	noPrompt promptKind = iota
	// otherPrompt: an unfinished line guard does not recognise ("Project
	// name: "). Never answered.
	otherPrompt
	yesNoPrompt
	passwordPrompt
	inquirerPrompt
	// replPrompt is a bare ">" line: llama.cpp's conversation prompt, and
	// node's or python's REPL. Nothing guard could type is the right answer,
	// so it is never answered, only ended.
	replPrompt
)

// recognised reports whether the text alone says the tool asks something:
// what guard goes by where the kernel cannot say whether it waits.
func (k promptKind) recognised() bool { return k > otherPrompt }

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
	// Questions that take y (or yes) and a newline, their choices in
	// parentheses or brackets at the end of the line: "(y)", "[Y/n]",
	// "(y/N)", "(yes/no/[fingerprint])". The groups are the yes and the no
	// choice as written, which say the default.
	yesNoRe = lazyRegexp(`(?i)(?:\(\s*(y|yes)\s*(?:/\s*(n|no)\b[^)]*)?\)|\[\s*(y|yes)\s*(?:/\s*(n|no)\b[^\]]*)?\])\s*[:?]?\s*$`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// detectPrompt looks at the unfinished last line of tail, the end of the
// output, and returns it with the kind of question it is; "" and noPrompt
// when the output ends with a finished line.
func detectPrompt(tail []byte) (string, promptKind) {
	return classify(promptLine(tail))
}

// lastFinishedLine is the last non-empty line of tail when tail ends with
// a finished line ("What is your project named?\n"); "" otherwise.
func lastFinishedLine(tail []byte) string {
	if len(tail) == 0 || tail[len(tail)-1] != '\n' {
		return ""
	}
	for lines := bytes.TrimRight(tail, "\r\n"); len(lines) > 0; {
		i := bytes.LastIndexByte(lines, '\n')
		if line := promptLine(lines[i+1:]); line != "" {
			return line
		}
		if i < 0 {
			break
		}
		lines = bytes.TrimRight(lines[:i], "\r\n")
	}
	return ""
}

// classify says what kind of question line is.
func classify(line string) (string, promptKind) {
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
	return line, otherPrompt
}

// choices returns the yes and the no choice of a yes/no question as
// written ("Y", "n"); no is "" when the only choice is yes ("(y)").
func choices(prompt string) (yes, no string) {
	m := yesNoRe().FindStringSubmatch(prompt)
	if m == nil {
		return "", ""
	}
	if m[1] != "" {
		return m[1], m[2]
	}
	return m[3], m[4]
}

// yesIsDefault reports whether a yes/no question says its default is yes:
// yes is the only choice ("(y)", npx's "Ok to proceed? (y)"), or the one
// written in capitals ("[Y/n]"). "(y/N)" defaults to no and "(y/n)" says
// nothing: neither is answered unless the manifest says prompts = "yes".
func yesIsDefault(prompt string) bool {
	yes, no := choices(prompt)
	switch {
	case yes == "":
		return false
	case no == "":
		return true
	}
	return isUpper(yes) && !isUpper(no)
}

func isUpper(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r)
}

// yesReply is the answer to a yes/no prompt; enter is what the Enter key sends
// on the child's stdin ("\n" on a pipe, "\r" on a terminal). A question
// whose choices are words ("(yes/no)": ssh host keys, terraform) rejects a
// bare y.
func yesReply(prompt, enter string) string {
	if yes, _ := choices(prompt); len(yes) > 1 {
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
// as is; the result is only matched and quoted, never written to the tool.
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
