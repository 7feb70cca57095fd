package guardtest_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/verify"
)

// TestLlamaGGUF reads the model back with a reader written from the GGUF
// specification (not from the writer) and checks what llama.cpp's loader
// needs of it: the keys its llama architecture and SentencePiece vocabulary
// read, with the types it insists on, and tensors of the shapes it creates,
// aligned, inside the file and not overlapping.
func TestLlamaGGUF(t *testing.T) {
	b := guardtest.LlamaGGUF(1)
	if err := verify.Header(b); err != nil {
		t.Fatalf("guard's header check refuses it: %v", err)
	}
	f, err := readGGUF(b)
	if err != nil {
		t.Fatal(err)
	}
	d := guardtest.TinyLlama
	for key, want := range map[string]any{
		"general.architecture":                   "llama",
		"llama.context_length":                   uint32(d.Ctx),
		"llama.embedding_length":                 uint32(d.Embd),
		"llama.block_count":                      uint32(d.Layers),
		"llama.feed_forward_length":              uint32(d.FF),
		"llama.attention.head_count":             uint32(d.Heads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.chat_template":                guardtest.ChatML,
		"tokenizer.ggml.add_bos_token":           true,
	} {
		if got := f.kv[key]; got != want {
			t.Errorf("%s = %#v, want %#v", key, got, want)
		}
	}
	tokens, _ := f.kv["tokenizer.ggml.tokens"].([]any)
	types, _ := f.kv["tokenizer.ggml.token_type"].([]any)
	scores, _ := f.kv["tokenizer.ggml.scores"].([]any)
	if len(tokens) != 260 || len(types) != len(tokens) || len(scores) != len(tokens) {
		t.Fatalf("%d tokens, %d types, %d scores; want 260 of each", len(tokens), len(types), len(scores))
	}
	if tokens[3] != "\u2581" || types[3] != int32(1) {
		t.Errorf("token 3 = %q (type %v), want the word-start mark (a normal token)", tokens[3], types[3])
	}
	// Every byte has its <0xXX> token: the SentencePiece tokenizer falls
	// back to them for any text, and llama.cpp refuses a vocabulary
	// without a newline byte token.
	for i := range 256 {
		if tokens[4+i] != fmt.Sprintf("<0x%02X>", i) || types[4+i] != int32(6) {
			t.Fatalf("token %d = %v (type %v), want the byte token <0x%02X> (type 6)", 4+i, tokens[4+i], types[4+i], i)
		}
	}
	for key, want := range map[string]string{"unknown": "<unk>", "bos": "<s>", "eos": "</s>"} {
		id, ok := f.kv["tokenizer.ggml."+key+"_token_id"].(uint32)
		if !ok || tokens[id] != want {
			t.Errorf("%s token id %v names %v, want %s", key, f.kv["tokenizer.ggml."+key+"_token_id"], tokens[id], want)
		}
	}
	if f.kv["llama.vocab_size"] != uint32(len(tokens)) {
		t.Errorf("llama.vocab_size = %v, want %d", f.kv["llama.vocab_size"], len(tokens))
	}

	want := map[string][]uint64{
		"token_embd.weight":  {uint64(d.Embd), 260},
		"output_norm.weight": {uint64(d.Embd)},
		"output.weight":      {uint64(d.Embd), 260},
	}
	for i := range d.Layers {
		for name, dims := range map[string][]uint64{
			"attn_norm": {uint64(d.Embd)}, "ffn_norm": {uint64(d.Embd)},
			"attn_q": {uint64(d.Embd), uint64(d.Embd)}, "attn_k": {uint64(d.Embd), uint64(d.Embd)},
			"attn_v": {uint64(d.Embd), uint64(d.Embd)}, "attn_output": {uint64(d.Embd), uint64(d.Embd)},
			"ffn_gate": {uint64(d.Embd), uint64(d.FF)}, "ffn_up": {uint64(d.Embd), uint64(d.FF)},
			"ffn_down": {uint64(d.FF), uint64(d.Embd)},
		} {
			want[fmt.Sprintf("blk.%d.%s.weight", i, name)] = dims
		}
	}
	if len(f.tensors) != len(want) {
		t.Errorf("%d tensors, want %d (llama.cpp refuses extra or missing ones)", len(f.tensors), len(want))
	}
	end := uint64(0)
	for _, tn := range f.tensors {
		if !slices.Equal(tn.dims, want[tn.name]) {
			t.Errorf("%s: dims %v, want %v", tn.name, tn.dims, want[tn.name])
		}
		if tn.typ != 0 || tn.offset%32 != 0 || tn.offset < end {
			t.Errorf("%s: type %d at offset %d (previous tensor ends at %d); want f32, 32-aligned, after it", tn.name, tn.typ, tn.offset, end)
		}
		end = tn.offset + 4*tn.elements()
		if f.dataStart+end > uint64(len(b)) {
			t.Fatalf("%s ends past the file", tn.name)
		}
		v := f.floats(b, tn)
		lo, hi := slices.Min(v), slices.Max(v)
		bound := float32(1 / math.Sqrt(float64(tn.dims[0])))
		switch {
		case len(tn.dims) == 1 && (lo != 1 || hi != 1):
			t.Errorf("%s: a norm weight should be all ones, spans [%g, %g]", tn.name, lo, hi)
		case len(tn.dims) > 1 && (lo < -bound || hi > bound || hi-lo < bound):
			t.Errorf("%s: values span [%g, %g], want random values across ±%g", tn.name, lo, hi, bound)
		}
	}
	if padded := f.dataStart + (end+31)/32*32; padded != uint64(len(b)) {
		t.Errorf("file is %d bytes, the last tensor (padded) ends at %d", len(b), padded)
	}

	if !bytes.Equal(b, guardtest.LlamaGGUF(1)) {
		t.Error("the same seed gave other bytes")
	}
	if other := guardtest.LlamaGGUF(2); len(other) != len(b) || bytes.Equal(other, b) {
		t.Error("another seed should change the weights and nothing else")
	}
}

// gguf is what readGGUF understood of a file.
type gguf struct {
	kv        map[string]any
	tensors   []ggufTensor
	dataStart uint64
}

type ggufTensor struct {
	name   string
	dims   []uint64
	typ    uint32
	offset uint64
}

func (t ggufTensor) elements() uint64 {
	n := uint64(1)
	for _, d := range t.dims {
		n *= d
	}
	return n
}

func (f *gguf) floats(b []byte, t ggufTensor) []float32 {
	v := make([]float32, t.elements())
	start := f.dataStart + t.offset
	binary.Decode(b[start:start+4*uint64(len(v))], binary.LittleEndian, v)
	return v
}

// readGGUF parses a GGUF v3 file: magic, version, tensor and pair counts,
// the pairs, the tensor infos, then data aligned to general.alignment
// (32 when absent).
func readGGUF(b []byte) (*gguf, error) {
	r := bytes.NewReader(b)
	var hdr struct {
		Magic   [4]byte
		Version uint32
		Tensors uint64
		KV      uint64
	}
	if err := binary.Read(r, binary.LittleEndian, &hdr); err != nil {
		return nil, err
	}
	if string(hdr.Magic[:]) != "GGUF" || hdr.Version != 3 {
		return nil, fmt.Errorf("header %q version %d", hdr.Magic, hdr.Version)
	}
	if hdr.KV > 1000 || hdr.Tensors > 1000 {
		return nil, fmt.Errorf("%d pairs, %d tensors: not a small model", hdr.KV, hdr.Tensors)
	}
	f := &gguf{kv: map[string]any{}}
	rd := ggufReader{r: r}
	for range hdr.KV {
		k := rd.str()
		f.kv[k] = rd.value(rd.u32())
	}
	for range hdr.Tensors {
		t := ggufTensor{name: rd.str()}
		n := rd.u32()
		for range n {
			t.dims = append(t.dims, rd.u64())
		}
		t.typ, t.offset = rd.u32(), rd.u64()
		f.tensors = append(f.tensors, t)
	}
	if rd.err != nil {
		return nil, rd.err
	}
	alignment := uint64(32)
	if a, ok := f.kv["general.alignment"].(uint32); ok {
		alignment = uint64(a)
	}
	pos := uint64(len(b) - r.Len())
	f.dataStart = (pos + alignment - 1) / alignment * alignment
	if strings.Trim(string(b[pos:f.dataStart]), "\x00") != "" {
		return nil, fmt.Errorf("padding before the data holds bytes")
	}
	return f, nil
}

// ggufReader reads little-endian values and keeps the first error.
type ggufReader struct {
	r   io.Reader
	err error
}

func (rd *ggufReader) read(v any) {
	if rd.err == nil {
		rd.err = binary.Read(rd.r, binary.LittleEndian, v)
	}
}

func (rd *ggufReader) u32() (v uint32) { rd.read(&v); return v }
func (rd *ggufReader) u64() (v uint64) { rd.read(&v); return v }

func (rd *ggufReader) str() string {
	n := rd.u64()
	if n > 1<<20 {
		rd.err = fmt.Errorf("string of %d bytes", n)
	}
	if rd.err != nil {
		return ""
	}
	b := make([]byte, n)
	rd.read(b)
	return string(b)
}

// value reads one value of GGUF type typ.
func (rd *ggufReader) value(typ uint32) any {
	switch typ {
	case 4:
		return rd.u32()
	case 5:
		var v int32
		rd.read(&v)
		return v
	case 6:
		var v float32
		rd.read(&v)
		return v
	case 7:
		var v bool
		rd.read(&v)
		return v
	case 8:
		return rd.str()
	case 9:
		elem, n := rd.u32(), rd.u64()
		if n > 1<<16 {
			rd.err = fmt.Errorf("array of %d values", n)
			return nil
		}
		var out []any
		for range n {
			out = append(out, rd.value(elem))
		}
		return out
	}
	if rd.err == nil {
		rd.err = fmt.Errorf("value type %d not used by the writer", typ)
	}
	return nil
}
