package manifest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// The decoded manifest (state.Layout.DecodedManifest) is what a manifest
// that decoded and validated once is kept as, so that no guard process
// decodes TOML again until the manifest changes. It is an index: a shim
// call reads its header and the entries it needs (the called tool, a
// model, a build), each found through a hash table in a few small reads,
// so a call costs the same with 3 tools or 10,000; commands read the
// whole manifest from it in one piece. The layout, little endian:
//
//	header   magic [8], file size u64, key, base, whole lengths u32, slots u32
//	key      what the decode depends on (decodedKey)
//	base     the manifest without its tools, builds, packages, models, auth
//	whole    the manifest (JSON)
//	entries  "t:NAME" a tool, "b:NAME" a build, "p:COMMAND" a package,
//	         "m:FILE" a model, "r:ROLE" the file of the first model with
//	         that role: each NAME, a NUL, then its value
//
// The base and the entries are in codec.go's binary form, the whole
// manifest (read by commands, which decode JSON anyway) in JSON.
//
//	slots    a power of two of (FNV-1a hash u64, offset u32, length u32),
//	         open addressing with linear probing; offset 0 is empty
//
// The size in the header finds a file cut short (a sandbox truncating
// files); an entry that does not read back is answered from the whole
// manifest instead, and that from the TOML.
const (
	indexMagic  = "GMINDEX1"
	indexHeader = 32
	indexSlot   = 16
)

// maxDecodedBytes bounds the decoded manifest: twice the JSON of a
// MaxBytes manifest, which is larger than its TOML, is never this large.
const maxDecodedBytes = 16 * MaxBytes

// LoadDecoded is Load through the decoded manifest in stateDir. Decoding
// TOML costs a fresh guard process one to two milliseconds, more than
// everything else a healthy shim call does, and more with every tool; the
// decoded manifest is keyed by the source file's path, size, mtime and
// inode, the home folder and guard's own executable (a new guard may read
// the manifest differently). Anything off (no decoded file, a stale key, an
// unreadable file) falls back to Load, and the decoded file is written
// again, best effort: it never decides the outcome.
//
// With lazy (a shim call) the manifest holds only its top-level settings,
// and Tool, Build, Package, ModelByFile, ModelByRole and FallbackModel
// read the entries they are asked for; its Tools, Builds, Packages, Models
// and Auth are nil (ToolNames reads them all). Close it when done.
func LoadDecoded(path, home, stateDir string, lazy bool) (*Manifest, error) {
	asked := path
	explicit := path != ""
	if path == "" {
		path = UserPath(home)
	}
	key, ok := decodedKey(path, home, explicit)
	if !ok || stateDir == "" {
		return Load(asked, home)
	}
	file := state.Layout{Dir: stateDir}.DecodedManifest()
	reload := func() (*Manifest, error) { return Load(asked, home) }
	if lazy {
		if m, err := openIndex(file, key, reload); err == nil {
			return m, nil
		}
	} else if data, err := state.ReadRegular(file, maxDecodedBytes, true); err == nil {
		if m, err := readWhole(data, key); err == nil {
			return m, nil
		}
	}
	m, err := reload()
	if err != nil {
		return nil, err
	}
	m.gen = generation(key)
	if data, err := encodeIndex(key, m); err == nil {
		writeDecoded(file, data)
	}
	return m, nil
}

// Generation names the manifest as decoded: it changes whenever the
// manifest (or guard) does, and is "" when the manifest was not read
// through the decoded file. The per-call shim repair keys its stamp on it.
func (m *Manifest) Generation() string { return m.gen }

func generation(key string) string { return strconv.FormatUint(fnv(key), 16) }

// decodedKey names what a decode depends on; ok is false when the source
// cannot be identified (then nothing is kept).
func decodedKey(path, home string, explicit bool) (string, bool) {
	self, ok := fileKey("/proc/self/exe")
	if !ok {
		return "", false
	}
	src, ok := fileKey(path)
	if !ok {
		if explicit {
			return "", false // Load reports the missing file
		}
		src = fmt.Sprintf("embedded:%d:%08x", len(defaultTOML), crc32.ChecksumIEEE(defaultTOML))
	}
	return fmt.Sprintf("v2|%s|%s|%s|%s", self, path, src, home), true
}

func fileKey(path string) (string, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", false
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec), true
}

func writeDecoded(file string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	_ = state.Replace(file, data, 0o600)
}

// fnv is 64-bit FNV-1a: the index's hash of an entry's name.
func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// encodeIndex lays m out as the decoded manifest (see the layout above).
func encodeIndex(key string, m *Manifest) ([]byte, error) {
	whole, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var top encoder
	encodeTop(&top, m)
	entries := map[string][]byte{}
	add := func(name string, write func(*encoder)) {
		var e encoder
		write(&e)
		entries[name] = e.b
	}
	for name, t := range m.Tools {
		add("t:"+name, func(e *encoder) { encodeTool(e, t) })
	}
	for name, b := range m.Builds {
		add("b:"+name, func(e *encoder) { encodeBuild(e, b) })
	}
	for cmd, p := range m.Packages {
		add("p:"+cmd, func(e *encoder) { e.str(p) })
	}
	for _, md := range m.Models {
		add("m:"+md.File, func(e *encoder) { encodeModel(e, md) })
		if _, seen := entries["r:"+md.Role]; md.Role != "" && !seen {
			add("r:"+md.Role, func(e *encoder) { e.str(md.File) }) // ModelByRole: the first model with the role
		}
	}
	slots := 8
	for slots < 2*len(entries) {
		slots *= 2
	}
	var buf bytes.Buffer
	buf.Write(make([]byte, indexHeader))
	buf.WriteString(key)
	buf.Write(top.b)
	buf.Write(whole)
	table := make([]byte, slots*indexSlot)
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		data := entries[name]
		off := buf.Len()
		buf.WriteString(name)
		buf.WriteByte(0)
		buf.Write(data)
		h := fnv(name)
		i := h & uint64(slots-1)
		for binary.LittleEndian.Uint32(table[i*indexSlot+8:]) != 0 {
			i = (i + 1) & uint64(slots-1)
		}
		s := table[i*indexSlot:]
		binary.LittleEndian.PutUint64(s, h)
		binary.LittleEndian.PutUint32(s[8:], uint32(off))
		binary.LittleEndian.PutUint32(s[12:], uint32(buf.Len()-off))
	}
	buf.Write(table)
	out := buf.Bytes()
	if len(out) > maxDecodedBytes {
		return nil, fmt.Errorf("decoded manifest of %d bytes", len(out))
	}
	copy(out, indexMagic)
	le := binary.LittleEndian
	le.PutUint64(out[8:], uint64(len(out)))
	le.PutUint32(out[16:], uint32(len(key)))
	le.PutUint32(out[20:], uint32(len(top.b)))
	le.PutUint32(out[24:], uint32(len(whole)))
	le.PutUint32(out[28:], uint32(slots))
	return out, nil
}

// header is the decoded manifest's header, checked against the file.
type header struct {
	size                     int64
	key, base, whole, slots  int64 // lengths; slots a count
	baseOff, wholeOff, table int64 // offsets
}

var errIndex = errors.New("not a decoded manifest of this source")

// parseHeader reads the header at the start of data against the file's
// size and the key expected.
func parseHeader(data []byte, size int64) (header, error) {
	le := binary.LittleEndian
	if len(data) < indexHeader || string(data[:8]) != indexMagic {
		return header{}, errIndex
	}
	h := header{
		size:  int64(le.Uint64(data[8:])),
		key:   int64(le.Uint32(data[16:])),
		base:  int64(le.Uint32(data[20:])),
		whole: int64(le.Uint32(data[24:])),
		slots: int64(le.Uint32(data[28:])),
	}
	h.baseOff = indexHeader + h.key
	h.wholeOff = h.baseOff + h.base
	h.table = h.size - h.slots*indexSlot
	if h.size != size || h.slots == 0 || h.slots&(h.slots-1) != 0 || h.wholeOff+h.whole > h.table {
		return header{}, errIndex // cut short, or not ours
	}
	return h, nil
}

// readWhole is the whole manifest from a decoded file read into data.
func readWhole(data []byte, key string) (*Manifest, error) {
	h, err := parseHeader(data, int64(len(data)))
	if err != nil || string(data[indexHeader:h.baseOff]) != key {
		return nil, errIndex
	}
	m := new(Manifest)
	if err := json.Unmarshal(data[h.wholeOff:h.wholeOff+h.whole], m); err != nil {
		return nil, err
	}
	m.gen = generation(key)
	return m, nil
}

// index is a lazy manifest's open decoded file and the entries read so
// far: one pointer per entry, as a whole manifest has.
type index struct {
	mu     sync.Mutex
	fd     int // -1 once closed
	h      header
	reload func() (*Manifest, error)
	whole  *Manifest // read when asked for everything, or when an entry would not read

	tools    map[string]*Tool
	builds   map[string]*Build
	packages map[string]string
	models   map[string]*Model
	roles    map[string]string
}

// openDecoded opens the decoded file: a regular file, not a link, no
// larger than any decoded manifest, so that nothing read from it (its
// header declares lengths) can make a call allocate or read more than
// maxDecodedBytes. It returns the descriptor and the file's size.
func openDecoded(file string) (int, int64, error) {
	fd, err := syscall.Open(file, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	var st syscall.Stat_t
	switch err := syscall.Fstat(fd, &st); {
	case err != nil:
		syscall.Close(fd)
		return -1, 0, err
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		syscall.Close(fd)
		return -1, 0, state.ErrNotRegular
	case st.Size > maxDecodedBytes:
		syscall.Close(fd)
		return -1, 0, errIndex
	}
	return fd, st.Size, nil
}

// openIndex opens the decoded file for a lazy manifest: one open, one
// fstat, one read of the header and the top-level settings.
func openIndex(file, key string, reload func() (*Manifest, error)) (*Manifest, error) {
	fd, size, err := openDecoded(file)
	if err != nil {
		return nil, err
	}
	m, err := readTop(fd, size, key)
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	m.idx.reload = reload
	return m, nil
}

func readTop(fd int, size int64, key string) (*Manifest, error) {
	buf := make([]byte, min(size, 4096))
	n, err := readIndex(fd, buf, 0)
	if err != nil {
		return nil, err
	}
	h, err := parseHeader(buf[:n], size)
	if err != nil || h.key != int64(len(key)) {
		return nil, errIndex
	}
	if need := h.wholeOff; int64(n) < need {
		buf = append(buf[:n], make([]byte, need-int64(n))...)
		if _, err := readIndex(fd, buf[n:], int64(n)); err != nil {
			return nil, err
		}
	}
	if string(buf[indexHeader:h.baseOff]) != key {
		return nil, errIndex
	}
	m := new(Manifest)
	d := decoder{b: buf[h.baseOff:h.wholeOff]}
	if decodeTop(&d, m); d.err != nil || len(d.b) != 0 {
		return nil, errIndex
	}
	m.gen = generation(key)
	m.idx = &index{fd: fd, h: h,
		tools: map[string]*Tool{}, builds: map[string]*Build{}, packages: map[string]string{},
		models: map[string]*Model{}, roles: map[string]string{}}
	return m, nil
}

// readIndex reads len(buf) bytes at off; a file that ends sooner is not
// an index (errIndex).
func readIndex(fd int, buf []byte, off int64) (int, error) {
	n, err := state.PreadFull(fd, buf, off)
	if err == nil && n < len(buf) {
		err = errIndex
	}
	return n, err
}

// find returns the value of the entry named name (codec.go's binary form);
// nil, nil when there is none.
func (x *index) find(name string) ([]byte, error) {
	if x.fd < 0 {
		return nil, os.ErrClosed
	}
	h := fnv(name)
	mask := x.h.slots - 1
	var window [4 * indexSlot]byte // four slots a read: most probes end in the first
	for i, probed := int64(h)&mask, int64(0); probed < x.h.slots; {
		n := min(int64(len(window)/indexSlot), x.h.slots-i)
		if _, err := readIndex(x.fd, window[:n*indexSlot], x.h.table+i*indexSlot); err != nil {
			return nil, err
		}
		for j := range n {
			s := window[j*indexSlot:]
			off, length := int64(binary.LittleEndian.Uint32(s[8:])), int64(binary.LittleEndian.Uint32(s[12:]))
			if off == 0 {
				return nil, nil
			}
			if binary.LittleEndian.Uint64(s) != h {
				continue
			}
			if off < x.h.wholeOff+x.h.whole || off+length > x.h.table {
				return nil, errIndex
			}
			if length <= int64(len(name)) {
				continue // another name with the same hash
			}
			entry := make([]byte, length)
			if _, err := readIndex(x.fd, entry, off); err != nil {
				return nil, err
			}
			if string(entry[:len(name)]) == name && entry[len(name)] == 0 {
				return entry[len(name)+1:], nil
			}
		}
		probed += n
		i = (i + n) & mask
	}
	return nil, nil
}

// lookup answers name from cache, else from the entry kind+name, read by
// decode; when the decoded file fails it, from the whole manifest
// (orWhole).
func lookup[V any](x *index, cache map[string]V, kind, name string, decode func(*decoder) V, orWhole func(*Manifest) V) V {
	x.mu.Lock()
	defer x.mu.Unlock()
	if v, ok := cache[name]; ok {
		return v
	}
	var v V
	if x.whole == nil {
		data, err := x.find(kind + name)
		if err == nil && data != nil {
			d := decoder{b: data}
			if v = decode(&d); d.err != nil || len(d.b) != 0 {
				err = errIndex
			}
		}
		if err == nil {
			cache[name] = v
			return v
		}
	}
	v = orWhole(x.wholeManifest())
	cache[name] = v
	return v
}

// wholeManifest is the whole manifest, read once: from the decoded file,
// else from the TOML again; an empty one when neither reads (every
// lookup then finds nothing, and the call runs the tool as it is).
func (x *index) wholeManifest() *Manifest {
	if x.whole != nil {
		return x.whole
	}
	if x.fd >= 0 {
		data := make([]byte, x.h.whole)
		if _, err := readIndex(x.fd, data, x.h.wholeOff); err == nil {
			m := new(Manifest)
			if json.Unmarshal(data, m) == nil {
				x.whole = m
				return m
			}
		}
	}
	if m, err := x.reload(); err == nil {
		x.whole = m
		return m
	}
	x.whole = new(Manifest)
	return x.whole
}

// Close lets go of a lazy manifest's decoded file; entries already read
// stay, others are read from the TOML again. It is a no-op on a whole
// manifest.
func (m *Manifest) Close() {
	if m == nil {
		return
	}
	if x := m.idx; x != nil {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.fd >= 0 {
			syscall.Close(x.fd)
			x.fd = -1
		}
	}
}

// ToolNames lists every tool's name (a lazy manifest reads them all).
func (m *Manifest) ToolNames() []string {
	tools := m.Tools
	if x := m.idx; x != nil {
		x.mu.Lock()
		tools = x.wholeManifest().Tools
		x.mu.Unlock()
	}
	return slices.Sorted(maps.Keys(tools))
}
