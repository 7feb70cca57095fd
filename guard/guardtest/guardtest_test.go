package guardtest_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/models/verify"
)

func TestGGUF(t *testing.T) {
	b := guardtest.GGUF(4096)
	if len(b) != 4096 || verify.Header(b) != nil {
		t.Fatalf("GGUF(4096): %d bytes, header %v", len(b), verify.Header(b))
	}
	if !bytes.Equal(b, guardtest.GGUF(4096)) || !bytes.Equal(b[:100], guardtest.GGUF(100)) {
		t.Fatal("GGUF is not one fixed body cut to size")
	}
	// A resume at a wrong offset must show: no shift of the body matches.
	for shift := 1; shift <= 512; shift++ {
		if bytes.Equal(b[8:1024], b[8+shift:1024+shift]) {
			t.Fatalf("the body repeats at a shift of %d", shift)
		}
	}
	path := filepath.Join(t.TempDir(), "sub", "m.gguf")
	w := guardtest.WriteGGUF(t, path, 64)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, w) || !bytes.Equal(w, guardtest.GGUF(64)) {
		t.Fatal("WriteGGUF wrote something else")
	}
	if s := guardtest.Sum([]byte("abc")); s != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Sum = %s", s)
	}
}

func TestRecorderAndBuffer(t *testing.T) {
	var r guardtest.Recorder
	var buf guardtest.Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			r.Log(heallog.Event{Event: heallog.Name(fmt.Sprintf("e%d", i%2))})
			fmt.Fprint(&buf, "x")
		})
	}
	wg.Wait()
	if len(r.All()) != 8 || len(r.Named("e0")) != 4 || len(r.Named("none")) != 0 {
		t.Fatalf("events %+v", r.All())
	}
	if buf.String() != "xxxxxxxx" {
		t.Fatalf("buffer %q", buf.String())
	}
}
