package guardtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
)

// TinyLlama is the shape of the model LlamaGGUF writes: the llama
// architecture at toy size. The real llama.cpp loads and runs it in a
// fraction of a second; its answers are noise.
var TinyLlama = struct {
	Embd, FF, Layers, Heads, Ctx int
}{Embd: 64, FF: 128, Layers: 2, Heads: 2, Ctx: 2048}

// ChatML is the chat template LlamaGGUF stores. A model with any chat
// template makes llama-completion enter conversation mode and wait on
// stdin unless it is given -no-cnv.
const ChatML = "{% for message in messages %}" +
	"{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
	"{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// GGUF value types and the tensor type used here, as the GGUF format
// numbers them.
const (
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9

	ggmlF32 = 0

	ggufAlign = 32 // general.alignment's default
)

// SentencePiece token types (llama.cpp's LLAMA_TOKEN_TYPE_*).
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// LlamaGGUF returns a complete GGUF v3 model the real llama.cpp runs: the
// llama architecture with TinyLlama's dimensions and f32 weights drawn
// from seed (the same seed gives the same bytes), a byte-level
// SentencePiece vocabulary (<unk>, <s>, </s>, the word-start mark ▁ that
// prints as a space, then the 256 tokens <0x00>…<0xFF>, so any text
// tokenizes and any answer detokenizes), and the ChatML chat template.
func LlamaGGUF(seed uint64) []byte {
	d := TinyLlama
	tokens := []string{"<unk>", "<s>", "</s>", "\u2581"}
	types := []int32{tokenUnknown, tokenControl, tokenControl, tokenNormal}
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, tokenByte)
	}
	vocab := len(tokens)

	var w ggufWriter
	w.str("general.architecture", "llama")
	w.str("general.name", "guard tiny random llama")
	w.u32("llama.context_length", d.Ctx)
	w.u32("llama.embedding_length", d.Embd)
	w.u32("llama.block_count", d.Layers)
	w.u32("llama.feed_forward_length", d.FF)
	w.u32("llama.attention.head_count", d.Heads)
	w.u32("llama.attention.head_count_kv", d.Heads)
	w.u32("llama.rope.dimension_count", d.Embd/d.Heads)
	w.f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
	w.u32("llama.vocab_size", vocab)
	w.str("tokenizer.ggml.model", "llama")
	w.strs("tokenizer.ggml.tokens", tokens)
	w.f32s("tokenizer.ggml.scores", make([]float32, vocab))
	w.i32s("tokenizer.ggml.token_type", types)
	w.u32("tokenizer.ggml.unknown_token_id", 0)
	w.u32("tokenizer.ggml.bos_token_id", 1)
	w.u32("tokenizer.ggml.eos_token_id", 2)
	w.boolean("tokenizer.ggml.add_bos_token", true)
	w.str("tokenizer.chat_template", ChatML)

	// Shapes list the fastest-moving dimension first, as ggml does:
	// {n_embd, n_vocab} is n_vocab rows of n_embd.
	w.tensor("token_embd.weight", d.Embd, vocab)
	w.tensor("output_norm.weight", d.Embd)
	w.tensor("output.weight", d.Embd, vocab)
	for i := range d.Layers {
		blk := fmt.Sprintf("blk.%d.", i)
		w.tensor(blk+"attn_norm.weight", d.Embd)
		w.tensor(blk+"attn_q.weight", d.Embd, d.Embd)
		w.tensor(blk+"attn_k.weight", d.Embd, d.Embd)
		w.tensor(blk+"attn_v.weight", d.Embd, d.Embd)
		w.tensor(blk+"attn_output.weight", d.Embd, d.Embd)
		w.tensor(blk+"ffn_norm.weight", d.Embd)
		w.tensor(blk+"ffn_gate.weight", d.Embd, d.FF)
		w.tensor(blk+"ffn_down.weight", d.FF, d.Embd)
		w.tensor(blk+"ffn_up.weight", d.Embd, d.FF)
	}
	return w.bytes(rand.New(rand.NewPCG(seed, 0x6775617264)))
}

// ggufWriter collects a GGUF file's key-value pairs and tensor shapes,
// then lays them out: header, pairs, tensor infos, padding, tensor data.
type ggufWriter struct {
	kv      bytes.Buffer
	nkv     int
	tensors []ggufTensor
}

type ggufTensor struct {
	name string
	dims []int
}

func (w *ggufWriter) key(k string, typ uint32) {
	w.nkv++
	putString(&w.kv, k)
	put(&w.kv, typ)
}

func (w *ggufWriter) str(k, v string) {
	w.key(k, ggufString)
	putString(&w.kv, v)
}

func (w *ggufWriter) u32(k string, v int) {
	w.key(k, ggufUint32)
	put(&w.kv, uint32(v))
}

func (w *ggufWriter) f32(k string, v float32) {
	w.key(k, ggufFloat32)
	put(&w.kv, v)
}

func (w *ggufWriter) boolean(k string, v bool) {
	w.key(k, ggufBool)
	put(&w.kv, v)
}

func (w *ggufWriter) array(k string, elem uint32, n int) {
	w.key(k, ggufArray)
	put(&w.kv, elem)
	put(&w.kv, uint64(n))
}

func (w *ggufWriter) strs(k string, v []string) {
	w.array(k, ggufString, len(v))
	for _, s := range v {
		putString(&w.kv, s)
	}
}

func (w *ggufWriter) f32s(k string, v []float32) {
	w.array(k, ggufFloat32, len(v))
	put(&w.kv, v)
}

func (w *ggufWriter) i32s(k string, v []int32) {
	w.array(k, ggufInt32, len(v))
	put(&w.kv, v)
}

func (w *ggufWriter) tensor(name string, dims ...int) {
	w.tensors = append(w.tensors, ggufTensor{name, dims})
}

// bytes lays the file out. A tensor of one dimension is a norm's weight
// and holds ones, as a trained model's do at initialisation; every other
// tensor holds values uniform in ±1/sqrt(its row length), small enough
// that activations stay finite through the layers.
func (w *ggufWriter) bytes(rng *rand.Rand) []byte {
	var out bytes.Buffer
	out.WriteString("GGUF")
	put(&out, uint32(3))
	put(&out, uint64(len(w.tensors)))
	put(&out, uint64(w.nkv))
	out.Write(w.kv.Bytes())
	var offset uint64
	for _, t := range w.tensors {
		putString(&out, t.name)
		put(&out, uint32(len(t.dims)))
		for _, d := range t.dims {
			put(&out, uint64(d))
		}
		put(&out, uint32(ggmlF32))
		put(&out, offset)
		offset = align(offset + 4*uint64(elements(t.dims)))
	}
	pad(&out)
	for _, t := range w.tensors {
		v := make([]float32, elements(t.dims))
		scale := float32(1 / math.Sqrt(float64(t.dims[0])))
		for i := range v {
			v[i] = 1
			if len(t.dims) > 1 {
				v[i] = (2*rng.Float32() - 1) * scale
			}
		}
		put(&out, v)
		pad(&out)
	}
	return out.Bytes()
}

func elements(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

func align(n uint64) uint64 { return (n + ggufAlign - 1) / ggufAlign * ggufAlign }

func pad(b *bytes.Buffer) {
	b.Write(make([]byte, align(uint64(b.Len()))-uint64(b.Len())))
}

// put writes v little-endian; bytes.Buffer never fails a write.
func put(b *bytes.Buffer, v any) { _ = binary.Write(b, binary.LittleEndian, v) }

func putString(b *bytes.Buffer, s string) {
	put(b, uint64(len(s)))
	b.WriteString(s)
}
