package openclaw

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// node is one JSON5 value of the config with where it sits in the text, so
// an edit can insert or cut bytes in place and leave every other byte
// (comments, quotes, spacing) as the person wrote it.
type node struct {
	kind       kind
	start, end int // the value's bytes: text[start:end]
	// An object's members or an array's elements, in order; for an
	// object, keys holds each member's decoded key.
	keys      []string
	keyStarts []int // where each member's key starts
	elems     []*node
	str       string // a string's decoded value
}

type kind int

const (
	kindObject kind = iota
	kindArray
	kindString
	kindOther // a number, true, false, null
)

// maxDepth bounds nesting: a config nested deeper is not one OpenClaw
// wrote, and a bound keeps a hostile file from exhausting the stack.
const maxDepth = 200

// parseError says where the text stopped being JSON5.
type parseError struct {
	line, col int
	msg       string
}

func (e *parseError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.line, e.col, e.msg)
}

// parse reads text as one JSON5 document (json5.org, the format OpenClaw
// reads its config in): comments, trailing commas, single-quoted strings,
// unquoted keys, hex numbers, Infinity and NaN. A byte order mark may
// start it.
func parse(text []byte) (*node, error) {
	p := &parser{s: text}
	if strings.HasPrefix(string(text), "\uFEFF") {
		p.i = 3
	}
	if err := p.space(); err != nil {
		return nil, err
	}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	if err := p.space(); err != nil {
		return nil, err
	}
	if p.i < len(p.s) {
		return nil, p.fail("text after the end of the document")
	}
	return n, nil
}

type parser struct {
	s []byte
	i int
}

func (p *parser) fail(format string, a ...any) error {
	line, col := 1, 1
	for _, r := range string(p.s[:min(p.i, len(p.s))]) {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &parseError{line, col, fmt.Sprintf(format, a...)}
}

// peek is the rune at the cursor and its size; 0, 0 at the end.
func (p *parser) peek() (rune, int) {
	if p.i >= len(p.s) {
		return 0, 0
	}
	return utf8.DecodeRune(p.s[p.i:])
}

// space skips white space and comments.
func (p *parser) space() error {
	for p.i < len(p.s) {
		r, n := p.peek()
		switch {
		case r == '/' && p.i+1 < len(p.s) && p.s[p.i+1] == '/':
			for p.i < len(p.s) {
				r, n := p.peek()
				if isLineEnd(r) {
					break
				}
				p.i += n
			}
		case r == '/' && p.i+1 < len(p.s) && p.s[p.i+1] == '*':
			end := strings.Index(string(p.s[p.i+2:]), "*/")
			if end < 0 {
				return p.fail("a /* comment is not closed")
			}
			p.i += 2 + end + 2
		case isSpace(r):
			p.i += n
		default:
			return nil
		}
	}
	return nil
}

func isLineEnd(r rune) bool { return r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' }

func isSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', '\u00A0', '\u2028', '\u2029', '\uFEFF':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

func (p *parser) value(depth int) (*node, error) {
	if depth > maxDepth {
		return nil, p.fail("nested deeper than %d", maxDepth)
	}
	r, _ := p.peek()
	switch {
	case r == '{':
		return p.object(depth)
	case r == '[':
		return p.array(depth)
	case r == '"' || r == '\'':
		start := p.i
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &node{kind: kindString, start: start, end: p.i, str: s}, nil
	case p.i >= len(p.s):
		return nil, p.fail("a value is missing")
	}
	start := p.i
	if err := p.literal(); err != nil {
		return nil, err
	}
	return &node{kind: kindOther, start: start, end: p.i}, nil
}

func (p *parser) object(depth int) (*node, error) {
	n := &node{kind: kindObject, start: p.i}
	p.i++ // {
	for {
		if err := p.space(); err != nil {
			return nil, err
		}
		if r, _ := p.peek(); r == '}' {
			p.i++
			n.end = p.i
			return n, nil
		}
		keyStart := p.i
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		if err := p.space(); err != nil {
			return nil, err
		}
		if r, _ := p.peek(); r != ':' {
			return nil, p.fail("a ':' is missing after the key %q", key)
		}
		p.i++
		if err := p.space(); err != nil {
			return nil, err
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.keys, n.keyStarts, n.elems = append(n.keys, key), append(n.keyStarts, keyStart), append(n.elems, v)
		if err := p.space(); err != nil {
			return nil, err
		}
		switch r, _ := p.peek(); r {
		case ',':
			p.i++
		case '}':
		default:
			return nil, p.fail("a ',' or '}' is missing in an object")
		}
	}
}

func (p *parser) array(depth int) (*node, error) {
	n := &node{kind: kindArray, start: p.i}
	p.i++ // [
	for {
		if err := p.space(); err != nil {
			return nil, err
		}
		if r, _ := p.peek(); r == ']' {
			p.i++
			n.end = p.i
			return n, nil
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
		if err := p.space(); err != nil {
			return nil, err
		}
		switch r, _ := p.peek(); r {
		case ',':
			p.i++
		case ']':
		default:
			return nil, p.fail("a ',' or ']' is missing in an array")
		}
	}
}

// key is a member's name: a string, or an ECMAScript IdentifierName
// (letters, $, _, digits after the first, \uXXXX escapes).
func (p *parser) key() (string, error) {
	if r, _ := p.peek(); r == '"' || r == '\'' {
		return p.str()
	}
	var b strings.Builder
	for first := true; ; first = false {
		r, n := p.peek()
		if r == '\\' {
			if p.i+1 >= len(p.s) || p.s[p.i+1] != 'u' {
				return "", p.fail("a key holds a '\\' that is not \\u")
			}
			p.i++
			v, err := p.hex(4)
			if err != nil {
				return "", err
			}
			r, n = v, 0
		}
		ok := r == '$' || r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r)
		if !first {
			ok = ok || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) ||
				unicode.Is(unicode.Pc, r) || r == '\u200C' || r == '\u200D'
		}
		if !ok {
			if first {
				return "", p.fail("a key is missing or not a name")
			}
			return b.String(), nil
		}
		b.WriteRune(r)
		p.i += n
	}
}

// str reads a single- or double-quoted string and returns its value.
func (p *parser) str() (string, error) {
	q, _ := p.peek()
	p.i++
	var b strings.Builder
	for {
		r, n := p.peek()
		switch {
		case n == 0:
			return "", p.fail("a string is not closed")
		case r == utf8.RuneError && n == 1:
			return "", p.fail("a string holds bytes that are not UTF-8")
		case r == q:
			p.i++
			return b.String(), nil
		case r == '\n' || r == '\r':
			return "", p.fail("a string holds a line break (write \\n)")
		case r == '\\':
			p.i++
			if err := p.escape(&b); err != nil {
				return "", err
			}
		default:
			b.WriteRune(r)
			p.i += n
		}
	}
}

// escape reads what follows a backslash in a string.
func (p *parser) escape(b *strings.Builder) error {
	r, n := p.peek()
	simple := map[rune]rune{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v', '\'': '\'', '"': '"', '\\': '\\'}
	switch {
	case n == 0:
		return p.fail("a string ends in a '\\'")
	case simple[r] != 0:
		b.WriteRune(simple[r])
		p.i++
	case r == '0':
		p.i++
		if d, _ := p.peek(); d >= '0' && d <= '9' {
			return p.fail("a string holds \\0 before a digit")
		}
		b.WriteByte(0)
	case r >= '1' && r <= '9':
		return p.fail("a string holds \\%c", r)
	case r == 'x':
		v, err := p.hex(2)
		if err != nil {
			return err
		}
		b.WriteRune(v)
	case r == 'u':
		v, err := p.hex(4)
		if err != nil {
			return err
		}
		if utf16IsHigh(v) && p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
			save := p.i
			p.i++
			lo, err := p.hex(4)
			if err == nil && lo >= 0xDC00 && lo <= 0xDFFF {
				v = (v-0xD800)<<10 + (lo - 0xDC00) + 0x10000
			} else {
				p.i = save
			}
		}
		b.WriteRune(v)
	case r == '\r':
		p.i++
		if p.i < len(p.s) && p.s[p.i] == '\n' {
			p.i++
		}
	case isLineEnd(r):
		p.i += n // a line continuation adds nothing
	default:
		b.WriteRune(r)
		p.i += n
	}
	return nil
}

func utf16IsHigh(r rune) bool { return r >= 0xD800 && r <= 0xDBFF }

// hex reads the letter at the cursor (x or u) and then n hex digits.
func (p *parser) hex(n int) (rune, error) {
	p.i++
	if p.i+n > len(p.s) {
		return 0, p.fail("an escape is cut short")
	}
	v, err := strconv.ParseUint(string(p.s[p.i:p.i+n]), 16, 32)
	if err != nil || strings.ContainsAny(string(p.s[p.i:p.i+n]), "+-") {
		return 0, p.fail("an escape holds a digit that is not hex")
	}
	p.i += n
	return rune(v), nil
}

var errNumber = errors.New("not a number")

// literal reads a number, true, false or null.
func (p *parser) literal() error {
	end := p.i
	for end < len(p.s) {
		c := p.s[end]
		if c == ',' || c == ']' || c == '}' || c == '/' || c == ':' || c == '"' || c == '\'' || c == '[' || c == '{' {
			break
		}
		r, n := utf8.DecodeRune(p.s[end:])
		if isSpace(r) {
			break
		}
		end += n
	}
	word := string(p.s[p.i:end])
	switch word {
	case "true", "false", "null":
		p.i = end
		return nil
	}
	if err := checkNumber(word); err != nil {
		return p.fail("%q is not a value", word)
	}
	p.i = end
	return nil
}

// checkNumber accepts a JSON5 number: an optional sign, then Infinity,
// NaN, 0x and hex digits, or a decimal with an optional point (digits
// may be on one side only) and exponent; no leading zero.
func checkNumber(w string) error {
	if w != "" && (w[0] == '+' || w[0] == '-') {
		w = w[1:]
	}
	switch {
	case w == "Infinity" || w == "NaN":
		return nil
	case len(w) > 2 && (w[:2] == "0x" || w[:2] == "0X"):
		for _, c := range w[2:] {
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return errNumber
			}
		}
		return nil
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(w), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) || len(whole) > 1 && whole[0] == '0' {
		return errNumber
	}
	if hasExp {
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			exp = exp[1:]
		}
		if exp == "" || !digits(exp) {
			return errNumber
		}
	}
	return nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
