package manifest

import (
	"reflect"
	"strconv"
	"strings"
)

// A value of the wrong type (size = "4096", [models] for [[models]]) gets
// the same kind of message as every other manifest error: the key with its
// index, what was written, what the key takes, and the line to write
// instead when there is an obvious one.

// mismatch is the message for the value at p, whose TOML type is got
// (typeName: string, int64, map[string]interface {}...) where the manifest
// wants want (integer, float, boolean, string, slice, table). When p is an
// element of a list (steps[0] of steps = ["make"] for [["make"]]), the
// element is the mistake and is said as an item of its list's key; x is
// the document's key index, which gives the value as written and its line.
func mismatch(file string, x *keyIndex, p keyPath, got, want string) *Error {
	named := p
	for len(named) > 0 && named[len(named)-1].index >= 0 {
		named = named[:len(named)-1]
	}
	key := named.tomlKey().String()
	// leaf is the key's own name, or for an item the list holding it
	// (steps, or steps[0] for the text of a step).
	item := len(named) < len(p)
	leaf := key
	if n := len(named); n > 0 && item {
		leaf = p[n-1 : len(p)-1].String()
	} else if n > 0 {
		leaf = named[n-1:].String()
	}
	name, raw, line := p.String(), x.raw(p), x.lineOf(p)
	if raw == "" && want == "slice" && strings.HasPrefix(got, "map") {
		return &Error{File: file, Line: line, Msg: name + ": [" + key + "] is one table, but " + key +
			" is a list of tables: write [[" + key + "]] (two brackets) before each one"}
	}
	what := describeValue(raw, got, want)
	if want == "table" {
		return &Error{File: file, Line: line, Msg: name + ": " + what + ", but " + key + " must be a table: " + tableFix(key)}
	}
	must, assign := leaf+" must be ", leaf+" = "
	if item {
		must, assign = "each item of "+leaf+" must be ", ""
	}
	msg := name + ": " + what + ", but " + must + describeType(want)
	if fix := valueFix(raw, got, want); fix != "" {
		msg += ": " + fix + ", " + assign + fixedValue(raw, got, want)
	}
	return &Error{File: file, Line: line, Msg: msg}
}

// describeValue says what was written: `"4096" is text`, `5 is a number`.
func describeValue(raw, got, want string) string {
	if raw == "" {
		raw = "the value"
	}
	switch {
	case got == "string":
		return raw + " is text"
	case strings.HasPrefix(got, "int"):
		return raw + " is a number"
	case strings.HasPrefix(got, "float") && want == "integer":
		return raw + " is a fraction"
	case strings.HasPrefix(got, "float"):
		return raw + " is a number"
	case got == "bool":
		return raw + " is a boolean"
	case strings.HasPrefix(got, "map"):
		return raw + " is a table"
	case strings.HasPrefix(got, "[]"):
		return raw + " is a list"
	case got == "date":
		return raw + " is a date"
	}
	return raw + " is a " + got
}

func describeType(want string) string {
	switch want {
	case "integer":
		return "a whole number"
	case "float":
		return "a number"
	case "boolean":
		return "true or false"
	case "string":
		return "text"
	case "slice":
		return "a list"
	}
	return "a " + want
}

// valueFix says how to write raw as the wanted type, when it is plain: the
// same number without quotes, text in quotes, one item in brackets.
func valueFix(raw, got, want string) string {
	if raw == "" {
		return ""
	}
	text, quoted := unquote(raw, got)
	switch {
	case want == "integer" && quoted && isInt(text), want == "float" && quoted && isFloat(text):
		return "write it without quotes"
	case want == "boolean" && quoted && (text == "true" || text == "false"):
		return "write it without quotes"
	case want == "string" && !quoted && !strings.ContainsAny(raw, "[{\"\n"):
		return "write it in quotes"
	case want == "slice" && quoted:
		return "write it in brackets"
	}
	return ""
}

func fixedValue(raw, got, want string) string {
	text, _ := unquote(raw, got)
	switch want {
	case "string":
		return strconv.Quote(raw)
	case "slice":
		return "[" + raw + "]"
	}
	return text
}

func unquote(raw, got string) (string, bool) {
	if got != "string" {
		return raw, false
	}
	if t, err := strconv.Unquote(raw); err == nil {
		return t, true
	}
	if len(raw) >= 2 && raw[0] == '\'' && raw[len(raw)-1] == '\'' {
		return raw[1 : len(raw)-1], true
	}
	return raw, false
}

func isInt(s string) bool {
	_, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	return err == nil
}

func isFloat(s string) bool {
	_, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	return err == nil
}

// tableFix says how to write the table key: a table of named entries takes
// one [key.NAME] each, any other table its own [key] header.
func tableFix(key string) string {
	if t, ok := typeAt(tomlKey(strings.Split(key, "."))); ok && t.Kind() == reflect.Map && elemType(t.Elem()).Kind() == reflect.Struct {
		return "write [" + key + ".NAME] for each entry"
	}
	return "write [" + key + "] and its keys below it"
}

// typeAt is the Go type the manifest decodes key into.
func typeAt(key tomlKey) (reflect.Type, bool) {
	t := reflect.TypeFor[Manifest]()
	for _, name := range key {
		t = elemType(t)
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
		case reflect.Struct:
			f, ok := fieldByKey(t, name)
			if !ok {
				return nil, false
			}
			t = f.Type
		default:
			return nil, false
		}
	}
	return t, true
}
