package manifest

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The TOML decoder gives no key positions, so error messages find their
// line with this small scanner of the TOML text. It runs only when there is
// an error to report (or a sha256 to pin), never on the healthy hot path. It
// tolerates any input: on text that is not TOML it records less, it never
// panics and it always moves forward.

// keyPath names one key of the document: name segments, and element indexes
// (0-based) of arrays and arrays of tables. Its String form is
// `models[2].size` or `packages."g++"`.
type keyPath []pathSeg

type pathSeg struct {
	name  string
	index int // >= 0 for an array element; -1 for a name
}

func (p keyPath) key(name string) keyPath {
	return append(p[:len(p):len(p)], pathSeg{name: name, index: -1})
}

func (p keyPath) index(i int) keyPath {
	return append(p[:len(p):len(p)], pathSeg{index: i})
}

func (p keyPath) String() string {
	var b strings.Builder
	for i, s := range p {
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tomlKey{s.name}.String())
	}
	return b.String()
}

// tomlKey is a key as TOML names it: its parts, without array indexes
// (models.size for models[1].size).
type tomlKey []string

// String is the key as written in TOML: bare parts as they are, others in
// double quotes with TOML's escapes (packages."g++").
func (k tomlKey) String() string {
	var b strings.Builder
	for i, part := range k {
		if i > 0 {
			b.WriteByte('.')
		}
		if part != "" && strings.IndexFunc(part, func(r rune) bool { return r >= utf8.RuneSelf || !isBareKeyByte(byte(r)) }) < 0 {
			b.WriteString(part)
			continue
		}
		b.WriteByte('"')
		for _, r := range part {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r == '\b':
				b.WriteString(`\b`)
			case r == '\t':
				b.WriteString(`\t`)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\f':
				b.WriteString(`\f`)
			case r == '\r':
				b.WriteString(`\r`)
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	return b.String()
}

// tomlKey drops the indexes, giving the key as TOML names it.
func (p keyPath) tomlKey() tomlKey {
	k := make(tomlKey, 0, len(p))
	for _, s := range p {
		if s.index < 0 {
			k = append(k, s.name)
		}
	}
	return k
}

// keyLoc is where one key (or table header, or array element) was written.
type keyLoc struct {
	off        int // byte offset of the key
	start, end int // the value's bytes; empty for a table header
}

type keyIndex struct {
	data  []byte
	lines []int             // byte offset of the start of each line
	at    map[string]keyLoc // keyPath.String() -> first definition
	seen  map[string][]int  // tomlKey.String() -> offsets of each definition, in document order
}

// indexKeys scans data once and records where every key is defined.
func indexKeys(data []byte) *keyIndex {
	x := &keyIndex{
		data:  data,
		lines: []int{0},
		at:    make(map[string]keyLoc),
		seen:  make(map[string][]int),
	}
	for i, c := range data {
		if c == '\n' {
			x.lines = append(x.lines, i+1)
		}
	}
	s := keyScanner{d: data, x: x, arrays: make(map[string]int)}
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		s.i = 3
	}
	s.scan()
	return x
}

// line returns the 1-based line holding byte offset off.
func (x *keyIndex) line(off int) int {
	return sort.SearchInts(x.lines, off+1)
}

// lineOf returns the line where p is defined or, when p itself is not
// written (a missing key, a key inside a multi-key value), the line of its
// nearest written parent; 0 when nothing on the path is written.
func (x *keyIndex) lineOf(p keyPath) int {
	for q := p; len(q) > 0; q = q[:len(q)-1] {
		if loc, ok := x.at[q.String()]; ok {
			return x.line(loc.off)
		}
	}
	return 0
}

// raw returns the value of p exactly as written, or "".
func (x *keyIndex) raw(p keyPath) string {
	loc, ok := x.at[p.String()]
	if !ok {
		return ""
	}
	return string(x.data[loc.start:loc.end])
}

// nthLine returns the line of the n-th (0-based) definition of k, which is
// how unknown keys (which carry no array index) find their
// place. It returns 0 when k was not seen.
func (x *keyIndex) nthLine(k tomlKey, n int) int {
	offs := x.seen[k.String()]
	if len(offs) == 0 {
		return 0
	}
	return x.line(offs[min(n, len(offs)-1)])
}

type keyScanner struct {
	d      []byte
	i      int
	x      *keyIndex
	arrays map[string]int // array of tables (indexed path) -> elements so far
}

func (s *keyScanner) scan() {
	var table keyPath
	for s.i < len(s.d) {
		s.skipBlank()
		if s.i >= len(s.d) {
			break
		}
		if s.d[s.i] == '[' {
			table = s.header(table)
		} else {
			s.keyValue(table)
		}
		s.skipLine()
	}
}

// header reads `[a.b]` or `[[a.b]]` and returns the table it opens.
func (s *keyScanner) header(table keyPath) keyPath {
	off := s.i
	s.i++
	isArray := s.i < len(s.d) && s.d[s.i] == '['
	if isArray {
		s.i++
	}
	names := s.key()
	if len(names) == 0 {
		return table
	}
	var p keyPath
	for j, n := range names {
		p = p.key(n)
		k := p.String()
		switch count, known := s.arrays[k]; {
		case isArray && j == len(names)-1:
			s.arrays[k] = count + 1
			p = p.index(count)
		case known:
			p = p.index(count - 1)
		}
	}
	s.record(p, keyLoc{off: off, start: off, end: off})
	s.see(names, off)
	return p
}

// keyValue reads `key = value` inside table and reports whether it found one.
func (s *keyScanner) keyValue(table keyPath) bool {
	off := s.i
	names := s.key()
	if len(names) == 0 || s.i >= len(s.d) || s.d[s.i] != '=' {
		return false
	}
	s.i++
	s.skipSpace()
	p := table
	for j, n := range names {
		p = p.key(n)
		if j < len(names)-1 {
			s.record(p, keyLoc{off: off, start: off, end: off})
		}
	}
	start := s.i
	end := s.value(p)
	s.record(p, keyLoc{off: off, start: start, end: end})
	s.see(append(table.tomlKey(), names...), off)
	return true
}

// value skips one value, recording the keys and elements inside it, and
// returns the end of the value's text.
func (s *keyScanner) value(p keyPath) int {
	if s.i >= len(s.d) {
		return s.i
	}
	switch s.d[s.i] {
	case '"', '\'':
		s.str()
		return s.i
	case '[':
		s.array(p)
		return s.i
	case '{':
		s.inlineTable(p)
		return s.i
	}
	// Numbers, booleans, dates (which may hold a space) run up to a
	// delimiter; trailing blanks are not part of the value.
	for s.i < len(s.d) && !strings.ContainsRune(",]}#\r\n", rune(s.d[s.i])) {
		s.i++
	}
	end := s.i
	for end > 0 && (s.d[end-1] == ' ' || s.d[end-1] == '\t') {
		end--
	}
	return end
}

func (s *keyScanner) array(p keyPath) {
	s.i++ // [
	for n := 0; ; n++ {
		s.skipBlank()
		if s.i >= len(s.d) {
			return
		}
		if s.d[s.i] == ']' {
			s.i++
			return
		}
		off := s.i
		elem := p.index(n)
		end := s.value(elem)
		s.record(elem, keyLoc{off: off, start: off, end: end})
		s.skipBlank()
		if s.i < len(s.d) && s.d[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.d) && s.d[s.i] == ']' {
			s.i++
		}
		return
	}
}

func (s *keyScanner) inlineTable(p keyPath) {
	s.i++ // {
	for {
		s.skipBlank()
		if s.i >= len(s.d) {
			return
		}
		if s.d[s.i] == '}' {
			s.i++
			return
		}
		if !s.keyValue(p) {
			return
		}
		s.skipBlank()
		if s.i < len(s.d) && s.d[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.d) && s.d[s.i] == '}' {
			s.i++
		}
		return
	}
}

// key reads a dotted key and leaves s.i after the blanks that follow it.
func (s *keyScanner) key() []string {
	var names []string
	for {
		s.skipSpace()
		name, ok := s.keyName()
		if !ok {
			return names
		}
		names = append(names, name)
		s.skipSpace()
		if s.i < len(s.d) && s.d[s.i] == '.' {
			s.i++
			continue
		}
		return names
	}
}

func (s *keyScanner) keyName() (string, bool) {
	if s.i >= len(s.d) {
		return "", false
	}
	start := s.i
	switch s.d[s.i] {
	case '"':
		s.str()
		inner := s.d[start+1 : max(start+1, s.i-1)]
		return unescapeBasic(string(inner)), true
	case '\'':
		s.str()
		return string(s.d[start+1 : max(start+1, s.i-1)]), true
	}
	for s.i < len(s.d) && isBareKeyByte(s.d[s.i]) {
		s.i++
	}
	return string(s.d[start:s.i]), s.i > start
}

// str skips a basic, literal or multi-line string starting at s.i.
func (s *keyScanner) str() {
	q := s.d[s.i]
	if s.i+2 < len(s.d) && s.d[s.i+1] == q && s.d[s.i+2] == q {
		s.i += 3
		for s.i < len(s.d) {
			if q == '"' && s.d[s.i] == '\\' {
				s.i = min(s.i+2, len(s.d))
				continue
			}
			if s.i+2 < len(s.d) && s.d[s.i] == q && s.d[s.i+1] == q && s.d[s.i+2] == q {
				s.i += 3
				// Up to two quotes right before the closing three belong
				// to the string.
				for k := 0; k < 2 && s.i < len(s.d) && s.d[s.i] == q; k++ {
					s.i++
				}
				return
			}
			s.i++
		}
		return
	}
	s.i++
	for s.i < len(s.d) && s.d[s.i] != q && s.d[s.i] != '\n' {
		if q == '"' && s.d[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i = min(s.i, len(s.d))
	if s.i < len(s.d) && s.d[s.i] == q {
		s.i++
	}
}

// record keeps the first definition of p: a TOML document defines a key
// once, and for a broken one the first place is as good as any.
func (s *keyScanner) record(p keyPath, loc keyLoc) {
	k := p.String()
	if _, ok := s.x.at[k]; !ok {
		s.x.at[k] = loc
	}
}

// see notes a definition as a TOML document defines keys: headers and
// full keys, without array indexes and without the parents of dotted keys.
func (s *keyScanner) see(k tomlKey, off int) {
	ks := k.String()
	s.x.seen[ks] = append(s.x.seen[ks], off)
}

func (s *keyScanner) skipSpace() {
	for s.i < len(s.d) && (s.d[s.i] == ' ' || s.d[s.i] == '\t') {
		s.i++
	}
}

// skipBlank skips spaces, line breaks and comments.
func (s *keyScanner) skipBlank() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		case '#':
			for s.i < len(s.d) && s.d[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

// skipLine moves past the end of the current line.
func (s *keyScanner) skipLine() {
	for s.i < len(s.d) && s.d[s.i] != '\n' {
		s.i++
	}
	if s.i < len(s.d) {
		s.i++
	}
}

func isBareKeyByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// unescapeBasic decodes the escapes of a TOML basic string; an escape it
// does not know is kept as written.
func unescapeBasic(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case '"', '\\':
			b.WriteByte(s[i])
		case 'x', 'u', 'U':
			n := 2
			switch s[i] {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+n < len(s) {
				r, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
				if err == nil && utf8.ValidRune(rune(r)) {
					b.WriteRune(rune(r))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
