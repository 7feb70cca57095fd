package manifest

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// The TOML library (pelletier/go-toml/v2, which does no work when guard
// starts) reads the text into plain tables and values; decode fills the
// Manifest from them here, so that every mistake is said in guard's words:
// a value of the wrong type with its key, index, line and fix (mismatch),
// a key the manifest does not have with a suggestion (unknownKeys).

// decode fills m from tree, the document as the TOML library read it. A
// value of the wrong type ends the decode (the rest would be guesses); keys
// the manifest does not have are collected in c.unknown.
func (c *checker) decode(tree map[string]any, m *Manifest) *Error {
	return c.value(nil, tree, reflect.ValueOf(m).Elem())
}

// value decodes data, found at p, into v.
func (c *checker) value(p keyPath, data any, v reflect.Value) *Error {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return c.value(p, data, v.Elem())
	}
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		// A Duration: text, or a number or boolean read as its text, so
		// that `timeout = 45` is reported as "45 is not a duration".
		switch data.(type) {
		case string, int64, float64, bool:
			return c.fail(p, u.UnmarshalText(fmt.Append(nil, data)))
		}
		return c.mismatch(p, data, "string")
	}
	switch v.Kind() {
	case reflect.Struct:
		table, ok := data.(map[string]any)
		if !ok {
			return c.mismatch(p, data, "table")
		}
		for _, k := range slices.Sorted(maps.Keys(table)) {
			f, ok := fieldByKey(v.Type(), k)
			if !ok {
				c.unknownAt(p.key(k), table[k])
				continue
			}
			if err := c.value(p.key(k), table[k], v.FieldByIndex(f.Index)); err != nil {
				return err
			}
		}
	case reflect.Map:
		table, ok := data.(map[string]any)
		if !ok {
			return c.mismatch(p, data, "table")
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(v.Type(), len(table)))
		}
		for _, k := range slices.Sorted(maps.Keys(table)) {
			e := reflect.New(v.Type().Elem()).Elem()
			if err := c.value(p.key(k), table[k], e); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(k), e)
		}
	case reflect.Slice:
		list, ok := data.([]any)
		if !ok {
			return c.mismatch(p, data, "slice")
		}
		s := reflect.MakeSlice(v.Type(), len(list), len(list))
		for i, x := range list {
			if err := c.value(p.index(i), x, s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.String:
		s, ok := data.(string)
		if !ok {
			return c.mismatch(p, data, "string")
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := data.(bool)
		if !ok {
			return c.mismatch(p, data, "boolean")
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, ok := data.(int64)
		if !ok || v.OverflowInt(n) {
			return c.mismatch(p, data, "integer")
		}
		v.SetInt(n)
	case reflect.Float64:
		switch n := data.(type) {
		case float64:
			v.SetFloat(n)
		case int64:
			v.SetFloat(float64(n))
		default:
			return c.mismatch(p, data, "float")
		}
	default:
		panic("manifest: no decoding for " + v.Type().String())
	}
	return nil
}

// fail is an error of a value's own decoding, at p.
func (c *checker) fail(p keyPath, err error) *Error {
	if err == nil {
		return nil
	}
	return &Error{File: c.file, Line: c.index().lineOf(p), Msg: p.String() + ": " + tidy(err.Error())}
}

// mismatch is the error for data at p where the manifest wants a value of
// the kind want (integer, float, boolean, string, slice, table), said as
// every other manifest error is (mismatch.go).
func (c *checker) mismatch(p keyPath, data any, want string) *Error {
	return mismatch(c.file, c.index(), p, typeName(data), want)
}

// typeName names a TOML value's type as mismatch describes it: string,
// int64, float64, bool, date, or the Go type of a table or a list.
func typeName(data any) string {
	switch data.(type) {
	case toml.LocalDate, toml.LocalTime, toml.LocalDateTime, time.Time:
		return "date"
	}
	return fmt.Sprintf("%T", data)
}

// unknownAt notes a key the manifest does not have. A table that was only
// implied by a dotted key (x.y = 1 implies x) is not a key the person
// wrote: the keys below it are reported instead.
func (c *checker) unknownAt(p keyPath, data any) {
	if table, ok := data.(map[string]any); ok && len(c.index().seen[p.tomlKey().String()]) == 0 {
		for _, k := range slices.Sorted(maps.Keys(table)) {
			c.unknownAt(p.key(k), table[k])
		}
		return
	}
	c.unknown = append(c.unknown, p.tomlKey())
}
