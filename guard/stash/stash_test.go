package stash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/sign"
)

// tree makes a recipe dir with a build/bin holding a tool, a library and
// its soname link, as llama.cpp's has.
func tree(t *testing.T) (root string, paths []string) {
	t.Helper()
	root = t.TempDir()
	bin := filepath.Join(root, "build", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(bin, "tool"), strings.Repeat("tool ", 1000), 0o755)
	write(t, filepath.Join(bin, "libx.so.0.2.0"), strings.Repeat("lib ", 5000), 0o644)
	if err := os.Symlink("libx.so.0.2.0", filepath.Join(bin, "libx.so.0")); err != nil {
		t.Fatal(err)
	}
	return root, []string{filepath.Join(bin, "tool"), filepath.Join(bin, "libx.so.0")}
}

func write(t *testing.T, p, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

var testKey = Key{Sum: strings.Repeat("ab", 32), Source: "files 1234", Compiler: "cc 1"}

func saved(t *testing.T) (*Store, string, Item) {
	t.Helper()
	root, paths := tree(t)
	s := &Store{Dir: filepath.Join(t.TempDir(), "stash")}
	it, err := s.Save(context.Background(), "r", testKey, root, []string{"build"}, paths)
	if err != nil {
		t.Fatal(err)
	}
	return s, root, it
}

func TestSaveRestoreKeepsModesAndLinks(t *testing.T) {
	s, root, it := saved(t)
	if it.Size >= 25000 {
		t.Errorf("entry is %d bytes: not compressed", it.Size)
	}
	if err := os.RemoveAll(filepath.Join(root, "build", "bin")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.From != "stash" || got.Files != 3 || got.Bytes != it.Size {
		t.Errorf("restored %+v", got)
	}
	bin := filepath.Join(root, "build", "bin")
	if fi, err := os.Stat(filepath.Join(bin, "tool")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("tool: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(bin, "libx.so.0.2.0")); err != nil || fi.Mode().Perm() != 0o644 || fi.Size() != 20000 {
		t.Errorf("library: %v %v", fi, err)
	}
	if link, err := os.Readlink(filepath.Join(bin, "libx.so.0")); err != nil || link != "libx.so.0.2.0" {
		t.Errorf("soname link: %q %v", link, err)
	}
	if left, _ := filepath.Glob(filepath.Join(bin, ".tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestRestoreMissesOtherKey(t *testing.T) {
	s, root, _ := saved(t)
	other := testKey
	other.Sum = strings.Repeat("cd", 32)
	if _, err := s.Restore(context.Background(), "r", other, root, []string{"build"}, nil); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("got %v, want ErrNoEntry", err)
	}
	if _, err := s.Restore(context.Background(), "other-recipe", testKey, root, []string{"build"}, nil); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("got %v, want ErrNoEntry", err)
	}
}

// refused checks that a restore of a damaged entry fails, places nothing,
// and removes the entry.
func refused(t *testing.T, s *Store, root, want string) {
	t.Helper()
	os.RemoveAll(filepath.Join(root, "build", "bin"))
	_, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, nil)
	if err == nil || errors.Is(err, ErrNoEntry) || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore: %v, want an error with %q", err, want)
	}
	if names, _ := os.ReadDir(filepath.Join(root, "build", "bin")); len(names) > 0 {
		t.Errorf("placed %v from a refused entry", names)
	}
	if items, _ := s.List(); len(items) != 0 {
		t.Errorf("the refused entry is still listed: %v", items)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir, entryName("r", testKey.Sum))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused entry's file is still there: %v", err)
	}
}

func TestTamperedEntryRefused(t *testing.T) {
	s, root, it := saved(t)
	p := filepath.Join(s.Dir, it.Name())
	data, _ := os.ReadFile(p)
	data[len(data)-10] ^= 1
	os.WriteFile(p, data, 0o600)
	refused(t, s, root, "sha256 mismatch")
}

// An entry whose index line matches (its own sha256 rewritten) but whose
// zstd stream is cut short is refused by the stream's own end: nothing is
// placed.
func TestTruncatedStreamRefused(t *testing.T) {
	s, root, it := saved(t)
	p := filepath.Join(s.Dir, it.Name())
	data, _ := os.ReadFile(p)
	data = data[:len(data)-40]
	reindex(t, s, it, data)
	refused(t, s, root, "")
}

// A file claiming far more bytes than the stream holds: read with the
// claim as a limit, found short.
func TestHugeClaimRefused(t *testing.T) {
	s, root, it := saved(t)
	p := filepath.Join(s.Dir, it.Name())
	data, _ := os.ReadFile(p)
	data = bytes.Replace(data, []byte(" 20000 "), []byte(" 8000000000 "), 1)
	reindex(t, s, it, data)
	refused(t, s, root, "not a stash entry")
	s, root, it = saved(t)
	data, _ = os.ReadFile(filepath.Join(s.Dir, it.Name()))
	data = bytes.Replace(data, []byte(" 20000 "), []byte(" 2000000000 "), 1)
	reindex(t, s, it, data)
	refused(t, s, root, "cut short")
}

// reindex writes data as the entry it and gives the index its sha256, as
// someone who can write the stash could.
func reindex(t *testing.T, s *Store, it Item, data []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	it.Size, it.SHA256 = int64(len(data)), hex.EncodeToString(sum[:])
	if err := s.put(context.Background(), it, data); err != nil {
		t.Fatal(err)
	}
}

func TestPlantedEntryRefused(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			s, root, it := saved(t)
			p := filepath.Join(s.Dir, it.Name())
			real := p + ".real"
			os.Rename(p, real)
			if kind == "symlink" {
				os.Symlink(real, p)
			} else if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			refused(t, s, root, "")
		})
	}
}

func TestPlantedLinkInBuildFolder(t *testing.T) {
	s, root, _ := saved(t)
	elsewhere := t.TempDir()
	os.RemoveAll(filepath.Join(root, "build", "bin"))
	os.Symlink(elsewhere, filepath.Join(root, "build", "bin"))
	_, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, nil)
	if err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("restore through a planted link: %v", err)
	}
	if names, _ := os.ReadDir(elsewhere); len(names) > 0 {
		t.Errorf("wrote %v through the planted link", names)
	}
	if items, _ := s.List(); len(items) != 1 {
		t.Errorf("the build folder's fault removed the entry: %v", items)
	}
}

func TestStashFolderRefused(t *testing.T) {
	s, root, _ := saved(t)
	moved := s.Dir + ".moved"
	os.Rename(s.Dir, moved)
	os.Symlink(moved, s.Dir)
	if _, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, nil); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a stash folder that is a link: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("giving a folder to another user needs root")
	}
	os.Remove(s.Dir)
	os.Rename(moved, s.Dir)
	if err := os.Chown(s.Dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, nil); err == nil || !strings.Contains(err.Error(), "another user") {
		t.Errorf("a stash folder of another user: %v", err)
	}
}

func TestEvictsOldestWithinBound(t *testing.T) {
	s, root, _ := saved(t)
	for i, c := range []string{"01", "02", "03"} {
		k := testKey
		k.Sum = strings.Repeat(c, 32)
		it, err := s.Save(context.Background(), "r", k, root, []string{"build"}, []string{filepath.Join(root, "build/bin/tool")})
		if err != nil {
			t.Fatal(i, err)
		}
		if i == 0 {
			s.MaxBytes = it.Size*2 + it.Size/2 // room for two of these
		}
	}
	items, _ := s.List()
	var got []string
	var total int64
	for _, it := range items {
		got = append(got, it.Key[:2])
		total += it.Size
	}
	if strings.Join(got, ",") != "02,03" || total > s.MaxBytes {
		t.Errorf("kept %v (%d bytes, bound %d), want the newest two: 02,03", got, total, s.MaxBytes)
	}
	if names, _ := filepath.Glob(filepath.Join(s.Dir, "*.gst")); len(names) != 2 {
		t.Errorf("entry files left: %v", names)
	}
}

func TestEntryOverBoundNotSaved(t *testing.T) {
	root, paths := tree(t)
	s := &Store{Dir: filepath.Join(t.TempDir(), "stash"), MaxBytes: 100}
	if _, err := s.Save(context.Background(), "r", testKey, root, []string{"build"}, paths); err == nil || !strings.Contains(err.Error(), "max_bytes") {
		t.Fatalf("save over the bound: %v", err)
	}
}

func TestExportThenRestoreFromSources(t *testing.T) {
	s, _, it := saved(t)
	shared := t.TempDir()
	key := testSecret(t)
	if n, err := s.Export(shared, key); err != nil || n != 1 {
		t.Fatalf("export: %d %v", n, err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(shared)))
	defer srv.Close()
	for _, src := range []string{"file://" + shared, srv.URL} {
		t.Run(src[:4], func(t *testing.T) {
			fresh := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: []sign.PublicKey{key.Public()}}
			root := t.TempDir()
			got, err := fresh.Restore(context.Background(), "r", testKey, root, []string{"build"}, []string{"file://" + t.TempDir(), src})
			if err != nil || got.From != src {
				t.Fatalf("restore from %s: %+v %v", src, got, err)
			}
			if link, err := os.Readlink(filepath.Join(root, "build/bin/libx.so.0")); err != nil || link != "libx.so.0.2.0" {
				t.Errorf("link: %q %v", link, err)
			}
			if items, _ := fresh.List(); len(items) != 1 || items[0].SHA256 != it.SHA256 {
				t.Errorf("not kept locally: %v", items)
			}
		})
	}
	// A source whose entry was tampered with is refused.
	p := filepath.Join(shared, it.Name())
	data, _ := os.ReadFile(p)
	data[len(data)-5] ^= 1
	os.WriteFile(p, data, 0o644)
	fresh := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: []sign.PublicKey{key.Public()}}
	if _, err := fresh.Restore(context.Background(), "r", testKey, t.TempDir(), []string{"build"}, []string{"file://" + shared}); err == nil || !strings.Contains(err.Error(), "sha256 mismatch") {
		t.Errorf("tampered source: %v", err)
	}
}

func TestHTTPGetLimits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 5000))
	}))
	defer srv.Close()
	if _, err := httpGet(context.Background(), srv.URL, 1000); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("over the limit: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if data, err := httpGet(ctx, srv.URL, 5000); err != nil || len(data) != 5000 {
		t.Errorf("at the limit: %d %v", len(data), err)
	}
}

// A damaged index is written anew at the next save, and the entry files it
// listed go with it: the bound still holds.
func TestDamagedIndexSweptAtNextSave(t *testing.T) {
	s, root, first := saved(t)
	os.WriteFile(s.indexPath(), []byte("garbage"), 0o600)
	if _, err := s.List(); err == nil {
		t.Fatal("a damaged index read without an error")
	}
	k := testKey
	k.Sum = strings.Repeat("ef", 32)
	if _, err := s.Save(context.Background(), "r", k, root, []string{"build"}, []string{filepath.Join(root, "build/bin/tool")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(s.Dir, first.Name())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the entry of the damaged index is still there: %v", err)
	}
	if items, err := s.List(); err != nil || len(items) != 1 || items[0].Key != k.Sum {
		t.Errorf("index after the save: %v %v", items, err)
	}
}

// A file the size of the bound on what an entry's files may claim (a
// huge sparse file planted as a library) is refused from its size, before
// a byte of it is read: the save would otherwise compress gigabytes of
// zeros into an entry every restore refuses.
func TestSaveRefusesHugeSparseFile(t *testing.T) {
	root, paths := tree(t)
	lib := filepath.Join(root, "build", "bin", "libx.so.0.2.0")
	if err := os.Truncate(lib, maxUnpacked+1); err != nil {
		t.Skip("no sparse file here:", err)
	}
	s := &Store{Dir: filepath.Join(t.TempDir(), "stash")}
	if _, err := s.Save(context.Background(), "r", testKey, root, []string{"build"}, paths); err == nil || !strings.Contains(err.Error(), "would claim more than") {
		t.Fatalf("save of a huge sparse library: %v", err)
	}
	if items, _ := s.List(); len(items) != 0 {
		t.Errorf("saved %v", items)
	}
}

// A restore killed before its commit (a SIGKILL of guard) leaves its
// temporary files beside their targets; the next restore, which brings
// the tool back, removes them, and nothing else.
func TestRestoreRemovesWhatAKilledRestoreLeft(t *testing.T) {
	s, root, _ := saved(t)
	bin := filepath.Join(root, "build", "bin")
	os.RemoveAll(bin)
	os.MkdirAll(bin, 0o755)
	left := []string{".tmp-tool-3k2j1h", ".tmp-libx.so.0.2.0-1a2b3c", ".tmp-libx.so.0-zz"}
	for _, n := range left {
		write(t, filepath.Join(bin, n), "half a file", 0o600)
	}
	write(t, filepath.Join(bin, ".tmp-notes"), "not a restore's", 0o644)
	if _, err := s.Restore(context.Background(), "r", testKey, root, []string{"build"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range left {
		if _, err := os.Lstat(filepath.Join(bin, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, left by a killed restore, is still there: %v", n, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(bin, ".tmp-notes")); err != nil {
		t.Errorf("a file no restore wrote was removed: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(bin, "tool")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("tool: %v %v", fi, err)
	}
}

// A bound lowered below what the stash keeps holds at the next save, even
// when that save's entry is itself too large to keep.
func TestLoweredBoundEvictsAtNextSave(t *testing.T) {
	s, root, it := saved(t)
	s.MaxBytes = it.Size / 2
	k := testKey
	k.Sum = strings.Repeat("12", 32)
	if _, err := s.Save(context.Background(), "r", k, root, []string{"build"}, []string{filepath.Join(root, "build/bin/tool"), filepath.Join(root, "build/bin/libx.so.0")}); err == nil || !strings.Contains(err.Error(), "max_bytes") {
		t.Fatalf("save over the lowered bound: %v", err)
	}
	if items, _ := s.List(); len(items) != 0 {
		t.Errorf("kept %v past the bound of %d bytes", items, s.MaxBytes)
	}
	if names, _ := filepath.Glob(filepath.Join(s.Dir, "*.gst")); len(names) != 0 {
		t.Errorf("entry files left past the bound: %v", names)
	}
}
