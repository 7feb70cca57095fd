package state_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/state"
)

func TestLayout(t *testing.T) {
	l := state.Layout{Dir: "/s"}
	for got, want := range map[string]string{
		l.Stamps():          "/s/stamps",
		l.Lock("apt"):       "/s/locks/apt.lock",
		l.Prompts():         "/s/prompts",
		l.Failures():        "/s/failures",
		l.Builds():          "/s/builds",
		l.Installed():       "/s/installed",
		l.DecodedManifest(): "/s/manifest.decoded",
		l.ShimsStamp():      "/s/shims.stamp",
		l.HealLog():         "/s/selfheal.log",
		l.Speeds():          "/s/speeds.json",
		l.Jobs():            "/s/jobs",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

func TestPathKey(t *testing.T) {
	// The stamps written before PathKey existed used this very name; a
	// change would make every model be hashed again.
	h := sha256.Sum256([]byte("/m/q.gguf"))
	if got, want := state.PathKey("/m/q.gguf"), hex.EncodeToString(h[:16]); got != want {
		t.Fatalf("PathKey = %s, want %s", got, want)
	}
	if state.PathKey("/m/./x/../q.gguf") != state.PathKey("/m/q.gguf") {
		t.Error("two spellings of one path got two keys")
	}
	if state.PathKey("/m/q.gguf") == state.PathKey("/m/r.gguf") {
		t.Error("two paths got one key")
	}
	t.Chdir(t.TempDir())
	wd, _ := os.Getwd()
	if state.PathKey("rel") != state.PathKey(filepath.Join(wd, "rel")) {
		t.Error("a relative path is not keyed by its absolute form")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// noTemp fails when a writer left a temporary file in dir.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), state.TempPrefix) {
			t.Errorf("temporary file left behind: %s", de.Name())
		}
	}
}

func TestWriteAtomicNewFileGetsMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.toml")
	if err := state.WriteAtomic(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "new" {
		t.Fatalf("content %q", got)
	}
	if m := mode(t, path); m != 0o644 {
		t.Fatalf("mode %v, want 0644 despite the umask", m)
	}
	noTemp(t, dir)
}

func TestWriteAtomicKeepsMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "manifest.toml")
	guardtest.WriteFile(t, path, "old", 0o600)
	if err := state.WriteAtomic(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "new" {
		t.Fatalf("content %q", got)
	}
	if m := mode(t, path); m != 0o600 {
		t.Fatalf("mode %v, want the file's own 0600", m)
	}
	noTemp(t, dir)
}

func TestWriteAtomicKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	path := filepath.Join(t.TempDir(), ".bashrc")
	guardtest.WriteFile(t, path, "old", 0o644)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := state.WriteAtomic(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 || fi.Mode() != 0o644 {
		t.Fatalf("owner %d:%d mode %v, want 65534:65534 0644", st.Uid, st.Gid, fi.Mode())
	}
}

func TestWriteAtomicThroughSymlinks(t *testing.T) {
	home, dots := t.TempDir(), t.TempDir()
	target := filepath.Join(dots, "bashrc")
	guardtest.WriteFile(t, target, "old", 0o640)
	// ~/.bashrc -> ~/.bashrc.link -> dots/bashrc, the first link relative.
	mid := filepath.Join(home, ".bashrc.link")
	if err := os.Symlink(target, mid); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, ".bashrc")
	if err := os.Symlink(".bashrc.link", link); err != nil {
		t.Fatal(err)
	}
	if err := state.WriteAtomic(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, link); m&os.ModeSymlink == 0 {
		t.Fatalf("the link became a %v", m)
	}
	if got := readFile(t, target); got != "new" {
		t.Fatalf("target content %q", got)
	}
	if m := mode(t, target); m != 0o640 {
		t.Fatalf("target mode %v, want its own 0640", m)
	}
	noTemp(t, home)
	noTemp(t, dots)
}

func TestWriteAtomicDanglingLinkCreatesTarget(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "manifest.toml")
	if err := os.Symlink("real.toml", link); err != nil {
		t.Fatal(err)
	}
	if err := state.WriteAtomic(link, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "real.toml")); got != "x" {
		t.Fatalf("target content %q", got)
	}
	if m := mode(t, link); m&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
}

func TestWriteAtomicLinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Symlink("b", a)
	os.Symlink("a", b)
	err := state.WriteAtomic(a, []byte("x"), 0o644)
	if !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("err = %v, want ELOOP", err)
	}
	noTemp(t, dir)
}

func TestWriteErrorsNameThePathAndKeepTheCause(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	err := state.WriteAtomic(path, []byte("x"), 0o644)
	if err == nil || !strings.HasPrefix(err.Error(), "write "+path+": ") || strings.Contains(err.Error(), state.TempPrefix) {
		t.Fatalf("writing over a folder: %v", err)
	}
	noTemp(t, dir)
	err = state.Replace(filepath.Join(dir, "absent", "f"), []byte("x"), 0o600)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing folder: %v, want ErrNotExist", err)
	}
}

func TestReplaceDoesNotFollow(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	target := filepath.Join(other, "target")
	guardtest.WriteFile(t, target, "do not touch", 0o644)
	path := filepath.Join(dir, "entry")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := state.Replace(path, []byte("entry"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, target); got != "do not touch" {
		t.Fatalf("symlink target changed: %q", got)
	}
	if m := mode(t, path); m != 0o600 {
		t.Fatalf("mode %v, want a regular 0600 file", m)
	}
	// An existing file's own mode does not survive either.
	guardtest.WriteFile(t, path, "old", 0o666)
	if err := state.Replace(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 || readFile(t, path) != "new" {
		t.Fatalf("mode %v content %q", m, readFile(t, path))
	}
	noTemp(t, dir)
}

func TestOpenLogRotatesAndRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	guardtest.WriteFile(t, path, strings.Repeat("a", 100), 0o600)
	f, err := state.OpenLog(path, 50)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("b")
	f.Close()
	if readFile(t, path) != "b" || len(readFile(t, path+".1")) != 100 {
		t.Fatalf("not rotated: %q", readFile(t, path))
	}
	f, err = state.OpenLog(path, 50)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("c")
	f.Close()
	if readFile(t, path) != "bc" {
		t.Fatalf("not appended: %q", readFile(t, path))
	}
	if m := mode(t, path); m != 0o600 {
		t.Fatalf("mode %v, want 0600", m)
	}
	link := filepath.Join(dir, "link.log")
	os.Symlink(path, link)
	if _, err := state.OpenLog(link, 0); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("OpenLog of a symlink: %v, want ELOOP", err)
	}
}

// A ~/.bashrc that leads to a FIFO or a device is refused, not renamed
// over: as root, replacing /dev/null's link target would replace the
// device itself.
func TestWriteAtomicRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "bashrc")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, link} {
		err := state.WriteAtomic(path, []byte("x"), 0o644)
		if !errors.Is(err, state.ErrNotRegular) {
			t.Errorf("WriteAtomic(%s): %v, want ErrNotRegular", path, err)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO was replaced: %v %v", fi, err)
	}
	noTemp(t, dir)
}

// A rotation that cannot happen (another user's .1 in a sticky /tmp; here
// a folder in its place) is an error: appending on would let the log grow
// past its cap.
func TestOpenLogRotationFailureIsAnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	guardtest.WriteFile(t, path, strings.Repeat("a", 100), 0o600)
	guardtest.WriteFile(t, filepath.Join(path+".1", "inside"), "x", 0o600)
	if f, err := state.OpenLog(path, 50); err == nil {
		f.Close()
		t.Fatal("OpenLog appended to a log past its cap that it could not rotate")
	}
	if len(readFile(t, path)) != 100 {
		t.Fatal("the log changed")
	}
}

// Another user's file at a log's path (a planted /tmp/selfheal.log) is
// refused, for every log guard keeps.
func TestOpenLogRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	path := filepath.Join(t.TempDir(), "x.log")
	guardtest.WriteFile(t, path, "theirs\n", 0o666)
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if f, err := state.OpenLog(path, 0); !errors.Is(err, state.ErrNotOwned) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("OpenLog of another user's file: %v, want ErrNotOwned", err)
	}
	if readFile(t, path) != "theirs\n" {
		t.Fatal("another user's log was written")
	}
}
