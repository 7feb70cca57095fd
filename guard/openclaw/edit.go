package openclaw

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The setting guard adds its shim folder to: OpenClaw's exec tool puts
// each folder of tools.exec.pathPrepend, in order, before the PATH of the
// command it runs, read afresh for every run.
var settingPath = []string{"tools", "exec", "pathPrepend"}

// Setting is the setting's name as `openclaw config get` spells it.
const Setting = "tools.exec.pathPrepend"

// shapeError is a config that parses but where the setting cannot go: the
// root, tools or tools.exec is not an object, or pathPrepend is not a list.
type shapeError struct{ what, want string }

func (e *shapeError) Error() string { return e.what + " is not " + e.want }

// member is obj's last member named key (as JSON.parse, a later one wins),
// nil when there is none.
func member(obj *node, key string) *node {
	for i := len(obj.keys) - 1; i >= 0; i-- {
		if obj.keys[i] == key {
			return obj.elems[i]
		}
	}
	return nil
}

// entries is the list tools.exec.pathPrepend holds, nil when it is not set.
func entries(root *node) ([]string, error) {
	arr, err := setting(root)
	if arr == nil || err != nil {
		return nil, err
	}
	var out []string
	for _, e := range arr.elems {
		if e.kind == kindString {
			out = append(out, e.str)
		}
	}
	return out, nil
}

// setting walks tools.exec.pathPrepend: the list, or nil where a level is
// missing; an error where a level is there with the wrong shape.
func setting(root *node) (*node, error) {
	n := root
	for i, key := range settingPath {
		if n.kind != kindObject {
			return nil, &shapeError{strings.Join(append([]string{"the config"}, settingPath[:i]...), "."), "an object"}
		}
		if n = member(n, key); n == nil {
			return nil, nil
		}
	}
	if n.kind != kindArray {
		return nil, &shapeError{Setting, "a list"}
	}
	return n, nil
}

// insertion is what adding dir to the setting inserts: text at offset at.
// An empty text means dir is already there.
type insertion struct {
	at   int
	text string
}

// addEntry says where and what to insert in text so that
// tools.exec.pathPrepend holds dir first, creating whichever levels are
// missing. It is one insertion, so that uninstall can take exactly those
// bytes out again; everything else in the file stays as it was.
func addEntry(text []byte, root *node, dir string) (insertion, error) {
	if !utf8.ValidString(dir) {
		return insertion{}, &shapeError{"the shim folder " + strconv.Quote(dir), "UTF-8, which a JSON5 string must be"}
	}
	quoted := jsonString(dir)
	if _, err := setting(root); err != nil {
		return insertion{}, err
	}
	n := root
	for i, key := range settingPath {
		next := member(n, key)
		if next == nil {
			// The missing levels, nested, as the first member of n.
			value := "[" + quoted + "]"
			for j := len(settingPath) - 1; j > i; j-- {
				value = "{" + jsonString(settingPath[j]) + ": " + value + "}"
			}
			return firstMember(text, n, jsonString(key)+": "+value), nil
		}
		n = next
	}
	for _, e := range n.elems {
		if e.kind == kindString && e.str == dir {
			return insertion{}, nil
		}
	}
	if len(n.elems) == 0 {
		return insertion{at: n.start + 1, text: quoted}, nil
	}
	return insertion{at: n.elems[0].start, text: quoted + "," + gap(text, n.start+1, n.elems[0].start)}, nil
}

// firstMember inserts member as obj's first member.
func firstMember(text []byte, obj *node, member string) insertion {
	if len(obj.elems) == 0 {
		return insertion{at: obj.start + 1, text: member}
	}
	return insertion{at: obj.keyStarts[0], text: member + "," + gap(text, obj.start+1, obj.keyStarts[0])}
}

// gap is the white space between an opening bracket and the first item,
// which the inserted item repeats so that it sits on its own line in a
// file written one item a line; a single space where a comment is there.
func gap(text []byte, from, to int) string {
	g := string(text[from:to])
	if g == "" || strings.TrimSpace(g) != "" {
		return " "
	}
	return g
}

// removeEntry returns text without the first entry dir in
// tools.exec.pathPrepend, and whether there was one. The entry goes with
// the comma that separated it; the list stays, empty or not.
func removeEntry(text []byte, root *node, dir string) ([]byte, bool, error) {
	arr, err := setting(root)
	if arr == nil || err != nil {
		return text, false, err
	}
	for i, e := range arr.elems {
		if e.kind != kindString || e.str != dir {
			continue
		}
		var from, to int
		switch last := len(arr.elems) - 1; {
		case i < last:
			from, to = e.start, arr.elems[i+1].start
		case i > 0:
			from, to = arr.elems[i-1].end, e.end
		default:
			from, to = e.start, e.end
			p := &parser{s: text, i: to}
			if p.space() == nil && p.i < len(text) && text[p.i] == ',' {
				to = p.i + 1
			}
		}
		out := append(append([]byte{}, text[:from]...), text[to:]...)
		return out, true, nil
	}
	return text, false, nil
}

// jsonString quotes s as JSON does, without escaping <, > and &.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
