package promptcache_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/sandbox-guard/guard/guard/promptcache"
)

func BenchmarkGetHit(b *testing.B) {
	s := &promptcache.Store{Dir: filepath.Join(b.TempDir(), "prompts")}
	k := keyOf("bench")
	if err := s.Put(k, promptcache.Entry{Stdout: bytes.Repeat([]byte("x"), 1024), Seconds: 1}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := s.Get(k); err != nil || !ok {
			b.Fatalf("Get: ok=%v err=%v", ok, err)
		}
	}
}

func BenchmarkGetMiss(b *testing.B) {
	s := &promptcache.Store{Dir: filepath.Join(b.TempDir(), "prompts")}
	k := keyOf("absent")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Get(k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKey(b *testing.B) {
	in := promptcache.KeyInput{
		Tool:    "llama-completion",
		ModelID: "484220320:1700000000000000000:1234567",
		Args:    []string{"-m", "484220320:1700000000000000000:1234567", "-p", "Write a haiku about sandboxes that forget their files", "-n", "64", "-no-cnv", "-t", "1"},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = promptcache.Key(in)
	}
}
