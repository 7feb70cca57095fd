package stash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sandbox-guard/guard/guard/sign"
)

func testSecret(t *testing.T) sign.SecretKey {
	t.Helper()
	k, err := sign.Generate("fleet-1")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// craft writes an entry as a hostile neighbour would, file by file (a
// link may leave the outputs: Save would refuse to make one), and returns
// its index item and bytes.
func craft(t *testing.T, files []File, contents map[string]string) (Item, []byte) {
	t.Helper()
	h := &header{Recipe: "r", Key: testKey.Sum, Source: testKey.Source, Compiler: testKey.Compiler}
	var body boundedBuffer
	body.limit = 1 << 20
	zw, err := zstd.NewWriter(&body)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !f.IsLink() {
			data := contents[f.Path]
			sum := sha256.Sum256([]byte(data))
			f.Size, f.SHA256 = int64(len(data)), hex.EncodeToString(sum[:])
			zw.Write([]byte(data))
		}
		h.Files = append(h.Files, f)
	}
	zw.Close()
	data := append(h.encode(), body.Bytes()...)
	sum := sha256.Sum256(data)
	return Item{Recipe: "r", Key: testKey.Sum, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Created: time.Now()}, data
}

// hostileFolder is a shared folder as a neighbour leaves one: it holds
// an index and the entry, the folder world-writable and, when the test
// runs as root, all of it owned by nobody.
func hostileFolder(t *testing.T, it Item, data []byte, sig string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	write(t, filepath.Join(dir, "index"), string(encodeIndex([]Item{it})), 0o666)
	write(t, filepath.Join(dir, it.Name()), string(data), 0o666)
	if sig != "" {
		write(t, filepath.Join(dir, sigName(it)), sig+"\n", 0o666)
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{dir, filepath.Join(dir, "index"), filepath.Join(dir, it.Name()), filepath.Join(dir, sigName(it))} {
			if err := os.Lchown(p, 65534, 65534); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// An entry from a shared folder others can write is code: whatever its
// index says of it, it runs only when a trusted key signed it. Refused, it
// is never placed and never reaches the local stash, so cleaning the
// shared folder undoes it.
func TestSharedEntryRestoredOnlyWhenSigned(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	evil := map[string]string{"build/bin/tool": "#!/bin/sh\ntouch " + marker + "\n"}
	it, data := craft(t, []File{{Path: "build/bin/tool", Mode: 0o755}}, evil)
	honest, honestData := craft(t, []File{{Path: "build/bin/tool", Mode: 0o755}}, map[string]string{"build/bin/tool": "#!/bin/sh\necho honest\n"})
	if honest.Name() != it.Name() {
		t.Fatal("the two entries must share a name: same recipe and key")
	}
	trusted, stranger := testSecret(t), testSecret(t)
	stranger.Name = "stranger-1"
	movedSig, err := Sign(honestData, trusted) // a good signature of other files
	if err != nil {
		t.Fatal(err)
	}
	strangerSig, _ := Sign(data, stranger)

	for _, c := range []struct {
		name    string
		sig     string
		trusted []sign.PublicKey
		want    error
	}{
		{"no trusted keys", "", nil, sign.ErrNoTrust},
		{"unsigned", "", []sign.PublicKey{trusted.Public()}, sign.ErrUnsigned},
		{"signed by a key not trusted", strangerSig, []sign.PublicKey{trusted.Public()}, sign.ErrUnknownKey},
		{"a trusted signature moved from other files", movedSig, []sign.PublicKey{trusted.Public()}, sign.ErrBadSig},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "file://" + hostileFolder(t, it, data, c.sig)
			local := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: c.trusted}
			root := t.TempDir()
			_, err := local.Restore(context.Background(), "r", testKey, root, []string{"build"}, []string{src})
			if !errors.Is(err, errUntrusted) || !errors.Is(err, c.want) {
				t.Fatalf("restore: %v, want refused: %v", err, c.want)
			}
			if _, err := os.Lstat(filepath.Join(root, "build/bin/tool")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused tool was placed: %v", err)
			}
			if items, _ := local.List(); len(items) != 0 {
				t.Errorf("the refused entry reached the local stash: %v", items)
			}
			if names, _ := filepath.Glob(filepath.Join(local.Dir, "*.gst")); len(names) != 0 {
				t.Errorf("entry files in the local stash: %v", names)
			}
		})
	}

	// A signature file that is a FIFO is refused, not waited on.
	dir := hostileFolder(t, it, data, "")
	if err := syscall.Mkfifo(filepath.Join(dir, sigName(it)), 0o666); err != nil {
		t.Fatal(err)
	}
	local := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: []sign.PublicKey{trusted.Public()}}
	if _, err := local.Restore(context.Background(), "r", testKey, t.TempDir(), []string{"build"}, []string{"file://" + dir}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a FIFO for the signatures: %v", err)
	}

	// Signed by the trusted key: restored, then kept locally.
	goodSig, _ := Sign(data, trusted)
	src := "file://" + hostileFolder(t, it, data, goodSig)
	root := t.TempDir()
	if got, err := local.Restore(context.Background(), "r", testKey, root, []string{"build"}, []string{src}); err != nil || got.From != src {
		t.Fatalf("a signed entry: %+v %v", got, err)
	}
	if items, _ := local.List(); len(items) != 1 {
		t.Errorf("the signed entry was not kept locally: %v", items)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a restore ran the tool")
	}
}

// A link whose target, resolved from its folder, leaves the output
// folders is refused from every source, the local stash included: a later
// build would write through it outside them.
func TestRestoreRefusesLinksOutOfTheOutputs(t *testing.T) {
	key := testSecret(t)
	for _, target := range []string{"/tmp/elsewhere", "../../src", "../../../../etc", "bin/../../x"} {
		it, data := craft(t, []File{
			{Path: "build/bin/tool", Mode: 0o755},
			{Path: "build/lib", Link: target},
		}, map[string]string{"build/bin/tool": "#!/bin/sh\n"})
		t.Run("local "+target, func(t *testing.T) {
			s := &Store{Dir: filepath.Join(t.TempDir(), "stash")}
			if err := s.put(context.Background(), it, data); err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			_, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, nil)
			if err == nil || !strings.Contains(err.Error(), "links out of the output folders") {
				t.Fatalf("restore: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(root, "build/lib")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the link was placed: %v", err)
			}
			if items, _ := s.List(); len(items) != 0 {
				t.Errorf("the entry was kept: %v", items)
			}
		})
		t.Run("shared "+target, func(t *testing.T) {
			sig, _ := Sign(data, key)
			src := "file://" + hostileFolder(t, it, data, sig)
			s := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: []sign.PublicKey{key.Public()}}
			root := t.TempDir()
			_, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, []string{src})
			if err == nil || !strings.Contains(err.Error(), "links out of the output folders") {
				t.Fatalf("restore: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(root, "build/lib")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the link was placed: %v", err)
			}
			if items, _ := s.List(); len(items) != 0 {
				t.Errorf("the entry reached the local stash: %v", items)
			}
		})
	}
	// Through another link of the entry: b -> . makes b/b/b/../../.. climb
	// from build/d/e three times, out of build, though its text resolves
	// to build/d/e.
	it, data := craft(t, []File{
		{Path: "build/d/e/tool", Mode: 0o755},
		{Path: "build/d/e/b", Link: "."},
		{Path: "build/d/e/a", Link: "b/b/b/../../.."},
	}, map[string]string{"build/d/e/tool": "#!/bin/sh\n"})
	s0 := &Store{Dir: filepath.Join(t.TempDir(), "stash")}
	if err := s0.put(context.Background(), it, data); err != nil {
		t.Fatal(err)
	}
	root0 := t.TempDir()
	if _, err := s0.Restore(context.Background(), "r", testKey, root0, []string{"build"}, nil); err == nil || !strings.Contains(err.Error(), "links out of the output folders") {
		t.Fatalf("a link out through another link: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root0, "build/d/e/a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link was placed: %v", err)
	}

	// A link that stays in the outputs is fine.
	it, data = craft(t, []File{
		{Path: "build/bin/libx.so.0.2.0", Mode: 0o644},
		{Path: "build/bin/libx.so.0", Link: "libx.so.0.2.0"},
		{Path: "build/lib/libx.so", Link: "../bin/libx.so.0"},
	}, map[string]string{"build/bin/libx.so.0.2.0": "lib"})
	s := &Store{Dir: filepath.Join(t.TempDir(), "stash")}
	if err := s.put(context.Background(), it, data); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(context.Background(), "r", testKey, t.TempDir(), []string{"build"}, nil); err != nil {
		t.Fatalf("links inside the outputs: %v", err)
	}
}
