package install

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// shimFolder is a shim folder whose guard copy is this test's own
// executable (a build of guard's module, as guard is).
func shimFolder(t *testing.T) (dir string, exe []byte) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if exe, err = os.ReadFile(self); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := copyGuard(exe, filepath.Join(dir, GuardName)); err != nil {
		t.Fatal(err)
	}
	return dir, exe
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// What a tool name is to guard: its own hard link or copy, an older
// install's symlink or an older guard's file to replace, or someone
// else's to leave alone.
func TestClassify(t *testing.T) {
	dir, exe := shimFolder(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	if err := os.Link(p(GuardName), p("linked")); err != nil {
		t.Fatal(err)
	}
	write(t, p("copied"), exe)
	write(t, p("older"), append(append([]byte{}, exe...), "an older build"...))
	write(t, p("script"), []byte("#!/bin/sh\necho mine\n"))
	for name, target := range map[string]string{"relative": GuardName, "absolute": p(GuardName), "elsewhere": "/bin/true", "dangling": p("gone")} {
		if err := os.Symlink(target, p(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(p("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Kind{
		"linked": Linked, "copied": Linked,
		"relative": Outdated, "absolute": Outdated, "older": Outdated,
		"elsewhere": Foreign, "dangling": Foreign, "script": Foreign, "fifo": Foreign,
		"none": Missing,
	} {
		if got := Classify(dir, name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// A file of someone else's is never guard's, whatever it holds: neither a
// copy of guard's bytes nor a build of guard (nor a hard link to either)
// that its owner could change after guard looked.
func TestClassifyOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root")
	}
	dir, exe := shimFolder(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	write(t, p("theirs"), exe)
	write(t, p("theirs-older"), append(append([]byte{}, exe...), "x"...))
	for _, name := range []string{"theirs", "theirs-older"} {
		if err := os.Chown(p(name), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(p("theirs"), p("linked-theirs")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"theirs", "theirs-older", "linked-theirs"} {
		if got := Classify(dir, name); got != Foreign {
			t.Errorf("%s (another user's): %v, want Foreign", name, got)
		}
	}
	// Install leaves them; Repair does too.
	if _, err := link(statCopy(dir), dir, "theirs", false, copyBytes(dir)); err != errNotOurs {
		t.Errorf("install on another user's file: %v, want errNotOurs", err)
	}
}

// Where the file system makes no hard link, each name is a copy of
// guard's copy: guard's all the same (status ok, the folder whole), and
// replaced with the copy when guard is updated.
func TestLinkFallsBackToACopy(t *testing.T) {
	dir, exe := shimFolder(t)
	hardLink = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EXDEV} }
	t.Cleanup(func() { hardLink = os.Link })
	state := t.TempDir()
	done, err := Repair(dir, state, "/nonexistent", []string{"npx", "hello"}, "gen1")
	if err != nil || len(done) != 2 {
		t.Fatalf("Repair: %v %v, want npx and hello made", done, err)
	}
	for _, name := range []string{"npx", "hello"} {
		var st, c syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(dir, name), &st); err != nil || syscall.Stat(filepath.Join(dir, GuardName), &c) != nil {
			t.Fatal(err)
		}
		if st.Ino == c.Ino || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Mode&0o777 != 0o755 {
			t.Errorf("%s: inode %d mode %o; want a 0755 copy of its own", name, st.Ino, st.Mode)
		}
		if got := Classify(dir, name); got != Linked {
			t.Errorf("%s: %v, want Linked", name, got)
		}
	}
	if !whole(dir, []string{"npx", "hello"}) {
		t.Error("a folder of copies is not whole: every call would check it again")
	}
	// An update: the copies hold the old guard, and are replaced.
	newer := filepath.Join(t.TempDir(), "guard")
	write(t, newer, append(append([]byte{}, exe...), "newer"...))
	r, err := Install(Options{Home: t.TempDir(), ShimDir: dir, StateDir: state, Self: newer, Tools: []string{"npx", "hello"}, NoRC: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r.Changes)
	for _, name := range []string{"npx", "hello"} {
		if !sameBytes(filepath.Join(dir, name), newer) {
			t.Errorf("%s after the update is not the new guard", name)
		}
	}
}
