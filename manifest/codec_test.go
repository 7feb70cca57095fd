package manifest

import (
	"fmt"
	"reflect"
	"testing"
)

// fill sets every exported field reachable from v to a value other than
// its zero, so a field the codec forgets shows in a round trip.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprint("s", *n))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			v.SetMapIndex(k, e)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	default:
		panic("fill: no case for " + v.Kind().String())
	}
}

// Every field of every type the decoded manifest keeps in binary form
// comes back as it went in, nil lists and maps apart from empty ones.
func TestCodecRoundTrip(t *testing.T) {
	var n int
	filled := func(p any) any { fill(reflect.ValueOf(p).Elem(), &n); return p }
	tool, build, model := filled(new(Tool)).(*Tool), filled(new(Build)).(*Build), filled(new(Model)).(*Model)
	top := filled(new(Manifest)).(*Manifest)
	top.Packages, top.Builds, top.Tools, top.Models, top.Auth = nil, nil, nil, nil, nil
	off := false
	sparse := &Tool{Name: "x", Args: []string{}, Env: map[string]string{}, Cache: &off}
	read := func(d *decoder, out any) {
		switch out := out.(type) {
		case *Tool:
			*out = *decodeTool(d)
		case *Build:
			*out = *decodeBuild(d)
		case *Model:
			*out = *decodeModel(d)
		case *Manifest:
			decodeTop(d, out)
		}
	}
	for _, c := range []struct {
		in, out any
		write   func(*encoder)
	}{
		{tool, new(Tool), func(e *encoder) { encodeTool(e, tool) }},
		{sparse, new(Tool), func(e *encoder) { encodeTool(e, sparse) }},
		{build, new(Build), func(e *encoder) { encodeBuild(e, build) }},
		{model, new(Model), func(e *encoder) { encodeModel(e, model) }},
		{top, new(Manifest), func(e *encoder) { encodeTop(e, top) }},
	} {
		var e encoder
		c.write(&e)
		d := decoder{b: e.b}
		read(&d, c.out)
		if d.err != nil || len(d.b) != 0 {
			t.Errorf("%T: %v, %d bytes left", c.in, d.err, len(d.b))
		}
		if !reflect.DeepEqual(c.in, c.out) {
			t.Errorf("%T changed in a round trip:\n got %+v\nwant %+v", c.in, c.out, c.in)
		}
		// Every field takes at least a byte: a value cut anywhere is an
		// error, never a panic nor a value.
		for i := range len(e.b) {
			d := decoder{b: e.b[:i]}
			read(&d, reflect.New(reflect.TypeOf(c.out).Elem()).Interface())
			if d.err == nil {
				t.Errorf("%T cut to %d of %d bytes read without an error", c.in, i, len(e.b))
			}
		}
	}
}
