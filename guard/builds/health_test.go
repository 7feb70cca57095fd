package builds_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/guardtest"
)

// copyFixtureBin copies the built programs (and the library unless
// withoutLib) into a fresh folder; $ORIGIN keeps them linked there.
func copyFixtureBin(t *testing.T, withoutLib bool) string {
	t.Helper()
	bin := builtFixtureBin(t)
	dir := t.TempDir()
	for _, name := range []string{"llama-completion", "llama-simple", "libfixture.so"} {
		if withoutLib && name == "libfixture.so" {
			continue
		}
		if err := copyFile(filepath.Join(bin, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckBinary(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	guardtest.WriteFile(t, script, "#!/bin/sh\necho hi\n", 0o755)
	plain := filepath.Join(dir, "plain")
	guardtest.WriteFile(t, plain, "#!/bin/sh\necho hi\n", 0o644)
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	good := copyFixtureBin(t, false)
	noLib := copyFixtureBin(t, true)
	linked := filepath.Join(dir, "linked-llama-simple")
	if err := os.Symlink(filepath.Join(good, "llama-simple"), linked); err != nil {
		t.Fatal(err)
	}
	elfBytes, err := os.ReadFile(filepath.Join(good, "llama-simple"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated")
	guardtest.WriteFile(t, truncated, string(elfBytes[:200]), 0o755)
	static := filepath.Join(dir, "static")
	guardtest.WriteFile(t, filepath.Join(dir, "static.c"), "int main(void) { return 0; }\n", 0o644)
	if out, err := exec.Command("cc", "-static", "-o", static, filepath.Join(dir, "static.c")).CombinedOutput(); err != nil {
		t.Fatalf("cc -static: %v\n%s", err, out)
	}

	tests := []struct {
		name    string
		path    string
		ok      bool
		reason  string // prefix
		missing []string
	}{
		{"missing", filepath.Join(dir, "nope"), false, "missing", nil},
		{"dangling symlink", dangling, false, "missing", nil},
		{"folder", dir, false, "not a regular file", nil},
		{"not executable", plain, false, "not executable", nil},
		{"script", script, true, "", nil},
		{"system elf", "/bin/ls", true, "", nil},
		{"static elf", static, true, "", nil},
		{"elf with its libs", filepath.Join(good, "llama-completion"), true, "", nil},
		{"symlink to elf ($ORIGIN is the real folder)", linked, true, "", nil},
		{"elf without its lib", filepath.Join(noLib, "llama-simple"), false, "missing library libfixture.so", []string{"libfixture.so"}},
		{"truncated elf", truncated, false, "corrupt binary", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, stamps := range []string{"", t.TempDir()} {
				h := builds.CheckBinary(tt.path, stamps, "")
				if h.OK != tt.ok || !strings.HasPrefix(h.Reason, tt.reason) || !slices.Equal(h.Missing, tt.missing) {
					t.Errorf("CheckBinary(%s, stamps=%q) = %+v; want ok=%v reason %q missing %v", tt.path, stamps, h, tt.ok, tt.reason, tt.missing)
				}
			}
		})
	}
}

func TestCheckBinaryStamp(t *testing.T) {
	good := copyFixtureBin(t, false)
	bin := filepath.Join(good, "llama-completion")
	stamps := t.TempDir()

	before := builds.SlowChecks()
	if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
		t.Fatalf("first check: %+v", h)
	}
	if entries, _ := os.ReadDir(stamps); len(entries) != 1 {
		t.Fatalf("want one stamp, got %v", entries)
	}
	for range 3 {
		if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
			t.Fatalf("stamped check: %+v", h)
		}
	}
	if n := builds.SlowChecks() - before; n != 1 {
		t.Fatalf("full inspections = %d; want 1 (the stamp was not reused)", n)
	}

	// A rebuilt binary (new mtime) is inspected again.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
		t.Fatalf("after touch: %+v", h)
	}
	if n := builds.SlowChecks() - before; n != 2 {
		t.Fatalf("full inspections = %d; want 2 (a changed binary must invalidate the stamp)", n)
	}

	// An evicted library is caught by the stamp's stat and named.
	if err := os.Remove(filepath.Join(good, "libfixture.so")); err != nil {
		t.Fatal(err)
	}
	h := builds.CheckBinary(bin, stamps, "")
	if h.OK || h.Reason != "missing library libfixture.so" {
		t.Fatalf("after library eviction: %+v", h)
	}
	// Unhealthy results are never stamped.
	if h := builds.CheckBinary(bin, stamps, ""); h.OK {
		t.Fatalf("second check after eviction: %+v", h)
	}
}

// A library rewritten in place with its old size and mtime (cp -p, rsync
// -t, tar do that) is a changed file: its ctime moved, and the stamp, which
// knows files as a model's stamp does (state.Identity), must not hold.
func TestCheckBinaryStampSeesAnInPlaceRewrite(t *testing.T) {
	good := copyFixtureBin(t, false)
	bin := filepath.Join(good, "llama-completion")
	lib := filepath.Join(good, "libfixture.so")
	stamps := t.TempDir()
	if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
		t.Fatalf("first check: %+v", h)
	}
	fi, err := os.Stat(lib)
	if err != nil {
		t.Fatal(err)
	}
	// The same number of bytes, none of them a library any more, and the
	// old mtime put back.
	if err := os.WriteFile(lib, make([]byte, fi.Size()), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(lib, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(lib); err != nil || after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the rewrite must keep size and mtime: %v %v", after, err)
	}
	before := builds.SlowChecks()
	h := builds.CheckBinary(bin, stamps, "")
	if n := builds.SlowChecks() - before; n != 1 {
		t.Fatalf("full inspections = %d; want 1 (the stamp held over a library rewritten in place)", n)
	}
	if h.OK {
		t.Fatalf("a zeroed library passed: %+v", h)
	}
}

func TestCheckBinaryReplacedBinary(t *testing.T) {
	good := copyFixtureBin(t, false)
	bin := filepath.Join(good, "llama-completion")
	stamps := t.TempDir()
	if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
		t.Fatal(h)
	}
	// Same path, new content: a truncated copy must not pass on the old stamp.
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	guardtest.WriteFile(t, bin, string(data[:100]), 0o755)
	if h := builds.CheckBinary(bin, stamps, ""); h.OK {
		t.Fatalf("truncated replacement passed: %+v", h)
	}
}

func TestParseLDConf(t *testing.T) {
	dir := t.TempDir()
	guardtest.WriteFile(t, filepath.Join(dir, "ld.so.conf"), "# comment\ninclude conf.d/*.conf\n/opt/a/lib # trailing\nhwcap 0 nosegneg\n", 0o644)
	guardtest.WriteFile(t, filepath.Join(dir, "conf.d", "x.conf"), "/opt/x:/opt/y\n\n", 0o644)
	guardtest.WriteFile(t, filepath.Join(dir, "conf.d", "loop.conf"), "include "+filepath.Join(dir, "ld.so.conf")+"\n", 0o644)
	got := builds.ParseLDConf(filepath.Join(dir, "ld.so.conf"), 0)
	for _, want := range []string{"/opt/a/lib", "/opt/x", "/opt/y"} {
		if !slices.Contains(got, want) {
			t.Errorf("ParseLDConf = %v; missing %s", got, want)
		}
	}
}

// A library cut short or overwritten in place (what a linker killed mid
// write leaves) keeps its path: the stamp must notice the new size or mtime
// and the full check must refuse the file, as ld.so would.
func TestCheckBinaryBrokenLibrary(t *testing.T) {
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, lib string)
	}{
		{"truncated", func(t *testing.T, lib string) {
			if err := os.Truncate(lib, 600); err != nil {
				t.Fatal(err)
			}
		}},
		{"empty", func(t *testing.T, lib string) {
			if err := os.Truncate(lib, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"not elf, same size", func(t *testing.T, lib string) {
			fi, err := os.Stat(lib)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(lib, []byte(strings.Repeat("x", int(fi.Size()))), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			good := copyFixtureBin(t, false)
			bin := filepath.Join(good, "llama-completion")
			lib := filepath.Join(good, "libfixture.so")
			stamps := t.TempDir()
			if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
				t.Fatalf("first check: %+v", h)
			}
			tt.damage(t, lib)
			for _, dir := range []string{stamps, ""} { // stamped, then the full check alone
				h := builds.CheckBinary(bin, dir, "")
				if h.OK || !strings.HasPrefix(h.Reason, "broken library "+lib+" (") || !slices.Equal(h.Missing, []string{"libfixture.so"}) {
					t.Fatalf("CheckBinary(stamps=%q) after the library was damaged = %+v", dir, h)

				}
			}
		})
	}
}

func TestLinkage(t *testing.T) {
	dir := t.TempDir()
	good := copyFixtureBin(t, false)
	script := filepath.Join(dir, "script")
	guardtest.WriteFile(t, script, "#!/bin/sh\necho hi\n", 0o755)
	static := filepath.Join(dir, "static")
	guardtest.WriteFile(t, filepath.Join(dir, "static.c"), "int main(void) { return 0; }\n", 0o644)
	if out, err := exec.Command("cc", "-static", "-o", static, filepath.Join(dir, "static.c")).CombinedOutput(); err != nil {
		t.Fatalf("cc -static: %v\n%s", err, out)
	}
	elfBytes, err := os.ReadFile(filepath.Join(good, "llama-simple"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated")
	guardtest.WriteFile(t, truncated, string(elfBytes[:200]), 0o755)

	tests := []struct {
		name   string
		path   string
		libs   []string
		static bool
	}{
		{"dynamic elf: the names it needs, not paths", filepath.Join(good, "llama-completion"), []string{"libfixture.so", "libc.so.6"}, false},
		{"shared library", filepath.Join(good, "libfixture.so"), []string{"libc.so.6"}, false},
		{"static elf", static, nil, true},
		{"script", script, nil, false},
		{"truncated elf", truncated, nil, false},
		{"missing", filepath.Join(dir, "nope"), nil, false},
	}
	for _, tt := range tests {
		libs, static := builds.Linkage(tt.path)
		if !slices.Equal(libs, tt.libs) || static != tt.static {
			t.Errorf("%s: Linkage = %q, %v; want %q, %v", tt.name, libs, static, tt.libs, tt.static)
		}
	}
}

// Libraries is what `guard which` lists: the files the loader will map,
// interpreter first, and the names that resolve to nothing.
func TestLibraries(t *testing.T) {
	good := copyFixtureBin(t, false)
	found, missing := builds.Libraries(filepath.Join(good, "llama-completion"), "")
	if len(missing) != 0 || len(found) < 3 || !strings.Contains(found[0], "ld-linux") || !slices.Contains(found, filepath.Join(good, "libfixture.so")) {
		t.Fatalf("found %q, missing %q", found, missing)
	}
	if err := os.Remove(filepath.Join(good, "libfixture.so")); err != nil {
		t.Fatal(err)
	}
	found, missing = builds.Libraries(filepath.Join(good, "llama-completion"), "")
	if !slices.Equal(missing, []string{"libfixture.so"}) || slices.Contains(found, filepath.Join(good, "libfixture.so")) {
		t.Fatalf("after removing the library: found %q, missing %q", found, missing)
	}
	if found, missing := builds.Libraries("/bin/sh-does-not-exist", ""); found != nil || missing != nil {
		t.Fatalf("a missing file loads %q, %q", found, missing)
	}
}

// A FIFO planted as a binary's stamp is never waited on: the full check
// runs, and its new stamp replaces the FIFO.
func TestCheckBinaryStampAFIFO(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stamps := t.TempDir()
	if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
		t.Fatalf("first check: %+v", h)
	}
	entries, _ := os.ReadDir(stamps)
	if len(entries) != 1 {
		t.Fatalf("want one stamp, got %v", entries)
	}
	stamp := filepath.Join(stamps, entries[0].Name())
	os.Remove(stamp)
	if err := syscall.Mkfifo(stamp, 0o600); err != nil {
		t.Fatal(err)
	}
	guardtest.Within(t, "CheckBinary with a FIFO for its stamp", func() {
		if h := builds.CheckBinary(bin, stamps, ""); !h.OK {
			t.Errorf("check: %+v", h)
		}
	})
	if fi, err := os.Lstat(stamp); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the stamp is not a file again: %v %v", fi, err)
	}
}
