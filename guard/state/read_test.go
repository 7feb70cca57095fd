package state_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/state"
)

func TestReadRegularRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero", dir} {
		guardtest.Within(t, "ReadRegular("+path+")", func() {
			if _, err := state.ReadRegular(path, 1<<20, false); !errors.Is(err, state.ErrNotRegular) || !strings.Contains(err.Error(), path) {
				t.Errorf("ReadRegular(%s) = %v, want ErrNotRegular naming the path", path, err)
			}
		})
	}
}

func TestReadRegularLimitAndLinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.toml")
	guardtest.WriteFile(t, path, "0123456789", 0o600)
	if b, err := state.ReadRegular(path, 10, false); err != nil || string(b) != "0123456789" {
		t.Fatalf("a file of exactly the limit: %q, %v", b, err)
	}
	if _, err := state.ReadRegular(path, 9, false); !errors.Is(err, state.ErrTooLarge) {
		t.Fatalf("a file over the limit: %v, want ErrTooLarge", err)
	}
	link := filepath.Join(dir, "link.toml")
	os.Symlink(path, link)
	if b, err := state.ReadRegular(link, 100, false); err != nil || string(b) != "0123456789" {
		t.Fatalf("following a link: %q, %v", b, err)
	}
	if _, err := state.ReadRegular(link, 100, true); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("nofollow on a link: %v, want ELOOP", err)
	}
	if _, err := state.ReadRegular(filepath.Join(dir, "none"), 100, false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

// A file the fstat shows is past the limit (a planted sparse file of 1 GiB)
// is refused before anything is allocated for it or read from it.
func TestReadRegularRefusesALargeFileUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	const limit = 64 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = state.ReadRegular(path, limit, true)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, state.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("refusing a file past the limit allocated %d bytes", got)
	}
}

func TestOpenLogRefusesAFIFOWithoutBlocking(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "selfheal.log")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	guardtest.Within(t, "OpenLog of a FIFO", func() {
		f, err := state.OpenLog(fifo, 0)
		if err == nil {
			f.Close()
			t.Error("OpenLog opened a FIFO")
		}
	})
	// A reader on the other end (someone waiting to swallow the log) must
	// not make it a log either.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	guardtest.Within(t, "OpenLog of a FIFO with a reader", func() {
		if f, err := state.OpenLog(fifo, 0); err == nil {
			f.Close()
			t.Error("OpenLog opened a FIFO that has a reader")
		}
	})
}

func TestOpenOwnReplacesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo, link, dev, sub := filepath.Join(dir, "fifo"), filepath.Join(dir, "link"), filepath.Join(dir, "dev"), filepath.Join(dir, "sub")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	os.Symlink(victim, link)
	os.Symlink("/dev/zero", dev)
	os.Mkdir(sub, 0o700)
	for _, path := range []string{fifo, link, dev} {
		guardtest.Within(t, "OpenOwn("+path+")", func() {
			f, err := state.OpenOwn(path, os.O_RDWR, 0o600)
			if err != nil {
				t.Fatalf("OpenOwn(%s): %v", path, err)
			}
			f.Close()
		})
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is not a file of guard's own: %v %v", path, fi, err)
		}
	}
	if _, err := os.Lstat(victim); err == nil {
		t.Error("a link was followed: its target was created")
	}
	if _, err := state.OpenOwn(sub, os.O_RDONLY, 0o600); !errors.Is(err, syscall.EISDIR) {
		t.Errorf("OpenOwn of a folder = %v, want EISDIR", err)
	}
	if _, err := os.Stat(sub); err != nil {
		t.Errorf("the folder was removed: %v", err)
	}
}

// TestPreadFull reads at an offset, and a file that ends before the buffer
// is full is a short count, not an error: the decoded manifest and the
// prompt cache each decide what a short file means.
func TestPreadFull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	for _, c := range []struct {
		size int
		off  int64
		want string
	}{{4, 3, "3456"}, {8, 6, "6789"}, {4, 10, ""}, {0, 0, ""}} {
		b := make([]byte, c.size)
		n, err := state.PreadFull(fd, b, c.off)
		if err != nil || string(b[:n]) != c.want {
			t.Errorf("PreadFull(%d bytes at %d) = %q, %v; want %q", c.size, c.off, b[:n], err, c.want)
		}
	}
}

// TestAbs makes a relative path absolute against the working folder and
// leaves an absolute one as it is.
func TestAbs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got := state.Abs("a/b"); got != filepath.Join(wd, "a", "b") {
		t.Errorf("Abs(a/b) = %q; want it under %s", got, wd)
	}
	if got := state.Abs("/x/../y"); got != "/y" {
		t.Errorf("Abs(/x/../y) = %q; want /y", got)
	}
}
