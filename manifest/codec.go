package manifest

import (
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"slices"
)

// The decoded manifest's entries and top-level settings are written in
// this small binary form rather than JSON: a fresh process's first
// json.Unmarshal builds encoding/json's reflection tables for every type it
// meets (0.2 to 0.4 ms, more than the rest of a healthy call), and a shim
// call is always a fresh process. Each value is its fields in order;
// strings and lists are a length and their contents, nil lists and maps
// apart from empty ones (length + 1, 0 for nil), maps in key order.
// TestCodecRoundTrip fills every field of each type by reflection, so a
// field added to a type and not here fails it.

type encoder struct{ b []byte }

func (e *encoder) uint(n uint64) { e.b = binary.AppendUvarint(e.b, n) }
func (e *encoder) int(n int64)   { e.b = binary.AppendVarint(e.b, n) }
func (e *encoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }

func (e *encoder) float(f float64) { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(f)) }

func (e *encoder) strs(ss []string) {
	if ss == nil {
		e.uint(0)
		return
	}
	e.uint(uint64(len(ss)) + 1)
	for _, s := range ss {
		e.str(s)
	}
}

// encodeMap writes m in key order, each value by put.
func encodeMap[V any](e *encoder, m map[string]V, put func(V)) {
	if m == nil {
		e.uint(0)
		return
	}
	e.uint(uint64(len(m)) + 1)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e.str(k)
		put(m[k])
	}
}

func (e *encoder) strMap(m map[string]string) { encodeMap(e, m, e.str) }
func (e *encoder) durMap(m map[string]Duration) {
	encodeMap(e, m, func(d Duration) { e.int(int64(d)) })
}

var errCodec = errors.New("decoded manifest entry cut short")

// decoder reads what encoder wrote; the first error sticks and every later
// read returns zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uint() uint64 {
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[k:]
	return n
}

// int reads binary.AppendVarint's zig-zag form.
func (d *decoder) int() int64 {
	u := d.uint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCodec
	}
	d.b = nil
}

func (d *decoder) str() string {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail()
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return f
}

// count reads a length written as length + 1 (0 for nil); each item takes
// at least one byte, so a count past what is left is damage.
func (d *decoder) count() (int, bool) {
	n := d.uint()
	if n == 0 {
		return 0, false
	}
	if n-1 > uint64(len(d.b)) {
		d.fail()
		return 0, false
	}
	return int(n - 1), true
}

func (d *decoder) strs() []string {
	n, ok := d.count()
	if !ok {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

// decodeMap reads what encodeMap wrote, each value by get.
func decodeMap[V any](d *decoder, get func() V) map[string]V {
	n, ok := d.count()
	if !ok {
		return nil
	}
	m := make(map[string]V, n)
	for range n {
		k := d.str()
		m[k] = get()
	}
	return m
}

func (d *decoder) strMap() map[string]string { return decodeMap(d, d.str) }
func (d *decoder) durMap() map[string]Duration {
	return decodeMap(d, func() Duration { return Duration(d.int()) })
}

// encodeTop writes the manifest's top-level settings: everything but its
// tools, builds, packages, models and auth.
func encodeTop(e *encoder, m *Manifest) {
	e.str(m.Log)
	e.str(m.ShimDir)
	e.str(m.ModelsDir)
	e.str(m.StateDir)
	e.int(int64(m.Budget.Cap))
	e.int(int64(m.Budget.Heal))
	e.int(int64(m.Budget.Grace))
	e.int(int64(m.Swarm.LightWords))
	e.int(int64(m.Swarm.LightTokens))
	e.int(int64(m.Swarm.FullTokens))
	e.strMap(m.Swarm.Roles)
	e.durMap(m.Swarm.Timeouts)
	e.int(m.Cache.MaxBytes)
	e.int(int64(m.Cache.TTL))
	e.int(m.Stash.MaxBytes)
	e.strs(m.Stash.TrustedKeys)
	e.str(m.Stash.SecretKey)
	e.int(int64(m.Stash.Lease))
	e.strs(m.Registry.PlainHTTP)
	if m.Self == nil {
		e.uint(0)
	} else {
		e.uint(1)
		e.strs(m.Self.URLs)
		e.str(m.Self.SHA256)
	}
	e.str(m.Source)
}

func decodeTop(d *decoder, m *Manifest) {
	m.Log = d.str()
	m.ShimDir = d.str()
	m.ModelsDir = d.str()
	m.StateDir = d.str()
	m.Budget.Cap = Duration(d.int())
	m.Budget.Heal = Duration(d.int())
	m.Budget.Grace = Duration(d.int())
	m.Swarm.LightWords = int(d.int())
	m.Swarm.LightTokens = int(d.int())
	m.Swarm.FullTokens = int(d.int())
	m.Swarm.Roles = d.strMap()
	m.Swarm.Timeouts = d.durMap()
	m.Cache.MaxBytes = d.int()
	m.Cache.TTL = Duration(d.int())
	m.Stash.MaxBytes = d.int()
	m.Stash.TrustedKeys = d.strs()
	m.Stash.SecretKey = d.str()
	m.Stash.Lease = Duration(d.int())
	m.Registry.PlainHTTP = d.strs()
	if d.uint() == 1 {
		m.Self = &Self{URLs: d.strs(), SHA256: d.str()}
	}
	m.Source = d.str()
}

func encodeTool(e *encoder, t *Tool) {
	e.str(t.Name)
	e.str(t.Path)
	e.str(t.Build)
	e.str(t.Package)
	e.strs(t.Args)
	e.strMap(t.Env)
	e.strs(t.Fallback)
	e.int(int64(t.Timeout))
	e.int(int64(t.Stall))
	e.str(t.Prompts)
	e.strs(t.Defaults)
	switch {
	case t.Cache == nil:
		e.uint(0)
	case *t.Cache:
		e.uint(1)
	default:
		e.uint(2)
	}
}

func decodeTool(d *decoder) *Tool {
	t := new(Tool)
	t.Name = d.str()
	t.Path = d.str()
	t.Build = d.str()
	t.Package = d.str()
	t.Args = d.strs()
	t.Env = d.strMap()
	t.Fallback = d.strs()
	t.Timeout = Duration(d.int())
	t.Stall = Duration(d.int())
	t.Prompts = d.str()
	t.Defaults = d.strs()
	if c := d.uint(); c > 0 {
		on := c == 1
		t.Cache = &on
	}
	return t
}

func encodeBuild(e *encoder, b *Build) {
	e.str(b.Name)
	e.str(b.Dir)
	e.str(b.Repo)
	e.strs(b.Needs)
	if b.Steps == nil {
		e.uint(0)
	} else {
		e.uint(uint64(len(b.Steps)) + 1)
		for _, s := range b.Steps {
			e.strs(s)
		}
	}
	e.int(int64(b.Timeout))
	e.strs(b.Outputs)
	e.strs(b.Targets)
	e.strs(b.StashFrom)
	e.str(b.StashTo)
	if b.Prebuilt == nil {
		e.uint(0)
		return
	}
	p := b.Prebuilt
	native := uint64(1) // unset
	if p.Native != nil {
		native = 2
		if *p.Native {
			native = 3
		}
	}
	e.uint(native)
	e.str(p.GitHub)
	e.str(p.Asset)
	e.str(p.SHA256)
}

func decodeBuild(d *decoder) *Build {
	b := new(Build)
	b.Name = d.str()
	b.Dir = d.str()
	b.Repo = d.str()
	b.Needs = d.strs()
	if n, ok := d.count(); ok {
		b.Steps = make([][]string, n)
		for i := range b.Steps {
			b.Steps[i] = d.strs()
		}
	}
	b.Timeout = Duration(d.int())
	b.Outputs = d.strs()
	b.Targets = d.strs()
	b.StashFrom = d.strs()
	b.StashTo = d.str()
	if n := d.uint(); n > 0 {
		p := &Prebuilt{}
		if n > 1 {
			on := n == 3
			p.Native = &on
		}
		p.GitHub, p.Asset, p.SHA256 = d.str(), d.str(), d.str()
		b.Prebuilt = p
	}
	return b
}

func encodeModel(e *encoder, m *Model) {
	e.str(m.File)
	e.int(m.Size)
	e.str(m.SHA256)
	e.strs(m.URLs)
	e.str(m.Role)
	e.int(int64(m.Budget.Base))
	e.float(m.Budget.TokensPerSecond)
	e.str(m.Fallback)
	e.int(int64(m.Connections))
	e.str(m.PushTo)
}

func decodeModel(d *decoder) *Model {
	m := new(Model)
	m.File = d.str()
	m.Size = d.int()
	m.SHA256 = d.str()
	m.URLs = d.strs()
	m.Role = d.str()
	m.Budget.Base = Duration(d.int())
	m.Budget.TokensPerSecond = d.float()
	m.Fallback = d.str()
	m.Connections = int(d.int())
	m.PushTo = d.str()
	return m
}
