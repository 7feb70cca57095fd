package builds_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/manifest"
)

// fakeAPT is a PATH holding only a recording apt-get (and sudo when asked),
// plus an empty folder where the fake install puts the command.
type fakeAPT struct {
	path   string // PATH value
	record string // argv and environment lines, in call order
	bin    string // where "installed" commands appear
}

// The fakes use shell builtins and absolute paths only: PATH holds nothing
// else, so a real sudo or apt-get can never be reached.
const fakeAptGet = `#!/bin/sh
echo "apt-get $*" >> "$RECORD"
echo "DEBIAN_FRONTEND=$DEBIAN_FRONTEND" >> "$RECORD"
case "$1" in
update) : > "$STATE/updated"; exit 0 ;;
install)
	if [ -n "$NEED_UPDATE" ] && [ ! -e "$STATE/updated" ]; then
		echo "E: Unable to locate package $5" >&2
		exit 100
	fi
	if [ -n "$BROKEN" ]; then
		echo "E: Sub-process /usr/bin/dpkg returned an error code (1)" >&2
		exit 100
	fi
	printf '#!/bin/sh\nexit 0\n' > "$BIN/fakecmd"
	/bin/chmod 755 "$BIN/fakecmd"
	exit 0 ;;
esac
exit 1
`

const fakeSudo = `#!/bin/sh
echo "sudo $*" >> "$RECORD"
[ "$1" = -n ] || exit 1
shift
if [ -n "$SUDO_PASSWORD" ]; then
	echo "sudo: a password is required" >&2
	exit 1
fi
while [ $# -gt 0 ]; do
	case "$1" in
	*=*) export "$1"; shift ;;
	*) break ;;
	esac
done
exec "$@"
`

func newFakeAPT(t *testing.T, withSudo bool) *fakeAPT {
	dir := t.TempDir()
	f := &fakeAPT{record: filepath.Join(dir, "record"), bin: filepath.Join(dir, "installed")}
	tools := filepath.Join(dir, "tools")
	guardtest.WriteFile(t, filepath.Join(tools, "apt-get"), fakeAptGet, 0o755)
	if withSudo {
		guardtest.WriteFile(t, filepath.Join(tools, "sudo"), fakeSudo, 0o755)
	}
	if err := os.Mkdir(f.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	f.path = tools + ":" + f.bin
	return f
}

func (f *fakeAPT) builder(t *testing.T, extraEnv ...string) (*builds.Builder, *guardtest.Buffer, *guardtest.Recorder) {
	b, stderr, evs := newBuilder(t, f.path)
	b.Env = append(b.Env, "RECORD="+f.record, "STATE="+filepath.Dir(f.record), "BIN="+f.bin)
	b.Env = append(b.Env, extraEnv...)
	b.Package = func(c string) string { return map[string]string{"fakecmd": "fakepkg"}[c] }
	return b, stderr, evs
}

func (f *fakeAPT) calls(t *testing.T) []string {
	data, err := os.ReadFile(f.record)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestEnsureCommandsAsRoot(t *testing.T) {
	f := newFakeAPT(t, false)
	b, _, evs := f.builder(t)
	b.SetEUID(0)
	if err := b.EnsureCommands(context.Background(), "llama-simple", []string{"fakecmd"}); err != nil {
		t.Fatal(err)
	}
	tools := strings.SplitN(f.path, ":", 2)[0]
	want := []string{
		"apt-get install -y --no-install-recommends fakepkg",
		"DEBIAN_FRONTEND=noninteractive",
	}
	if got := f.calls(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s (apt-get from %s)", strings.Join(got, "\n"), strings.Join(want, "\n"), tools)
	}
	ev := evs.Named("package.install")
	if len(ev) != 1 || ev[0].Result != "ok" || ev[0].Target != "fakepkg" || ev[0].Reason != "missing command fakecmd" || ev[0].Tool != "llama-simple" {
		t.Fatalf("events = %+v", ev)
	}
	// Present now: nothing runs the second time.
	if err := b.EnsureCommands(context.Background(), "llama-simple", []string{"fakecmd"}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.calls(t)); n != 2 {
		t.Fatalf("apt-get ran again (%d record lines)", n)
	}
}

func TestEnsureCommandsThroughSudo(t *testing.T) {
	f := newFakeAPT(t, true)
	b, _, _ := f.builder(t)
	b.SetEUID(1000)
	if err := b.EnsureCommands(context.Background(), "x", []string{"fakecmd"}); err != nil {
		t.Fatal(err)
	}
	aptGet := filepath.Join(strings.SplitN(f.path, ":", 2)[0], "apt-get")
	want := []string{
		"sudo -n DEBIAN_FRONTEND=noninteractive " + aptGet + " install -y --no-install-recommends fakepkg",
		"apt-get install -y --no-install-recommends fakepkg",
		"DEBIAN_FRONTEND=noninteractive",
	}
	if got := f.calls(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestEnsureCommandsUpdatesUnknownPackage(t *testing.T) {
	f := newFakeAPT(t, false)
	b, _, _ := f.builder(t, "NEED_UPDATE=1")
	b.SetEUID(0)
	if err := b.EnsureCommands(context.Background(), "x", []string{"fakecmd"}); err != nil {
		t.Fatal(err)
	}
	var argv []string
	for _, l := range f.calls(t) {
		if strings.HasPrefix(l, "apt-get ") {
			argv = append(argv, l)
		}
	}
	want := "apt-get install -y --no-install-recommends fakepkg|apt-get update|apt-get install -y --no-install-recommends fakepkg"
	if strings.Join(argv, "|") != want {
		t.Fatalf("calls %q; want %q", argv, want)
	}
}

func TestEnsureCommandsFails(t *testing.T) {
	tests := []struct {
		name     string
		uid      int
		sudo     bool
		env      []string
		want     []string
		wantRuns bool
	}{
		{"no root no sudo", 1000, false, nil, []string{"not root and sudo is not available", "sudo apt-get install -y fakepkg"}, false},
		{"sudo wants a password", 1000, true, []string{"SUDO_PASSWORD=1"}, []string{"a password is required", "sudo apt-get install -y fakepkg"}, true},
		{"apt-get fails", 0, false, []string{"BROKEN=1"}, []string{"exited with status 100", "dpkg returned an error", "apt.log"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAPT(t, tt.sudo)
			b, _, evs := f.builder(t, tt.env...)
			b.SetEUID(tt.uid)
			err := b.EnsureCommands(context.Background(), "x", []string{"fakecmd"})
			if err == nil {
				t.Fatal("EnsureCommands succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if ran := len(f.calls(t)) > 0; ran != tt.wantRuns {
				t.Errorf("apt-get or sudo ran = %v; want %v", ran, tt.wantRuns)
			}
			if ev := evs.Named("package.install"); len(ev) != 1 || ev[0].Result != "failed" {
				t.Errorf("events = %+v", ev)
			}
		})
	}
}

func TestEnsureCommandsNoAptGet(t *testing.T) {
	b, _, _ := newBuilder(t, t.TempDir())
	b.SetEUID(0)
	b.Package = func(c string) string { return map[string]string{"g++": "g++"}[c] }
	err := b.EnsureCommands(context.Background(), "x", []string{"cmake", "g++"})
	if err == nil || !strings.Contains(err.Error(), "cannot install cmake g++: apt-get not found") {
		t.Fatalf("got %v", err)
	}
}

func TestInstallPackages(t *testing.T) {
	f := newFakeAPT(t, false)
	b, _, _ := f.builder(t)
	b.SetEUID(0)
	if err := b.InstallPackages(context.Background(), "x", []string{"cmake", "g++"}); err != nil {
		t.Fatal(err)
	}
	if got := f.calls(t); len(got) == 0 || got[0] != "apt-get install -y --no-install-recommends cmake g++" {
		t.Fatalf("calls %q", got)
	}
}

func TestBuildInstallsWhatItNeeds(t *testing.T) {
	f := newFakeAPT(t, true)
	b, _, evs := f.builder(t)
	b.SetEUID(1000)
	dir := t.TempDir()
	rec := &manifest.Build{Name: "needs", Dir: dir, Needs: []string{"fakecmd"}, Steps: [][]string{{"fakecmd"}}}
	if err := b.Build(context.Background(), "x", rec, ""); err != nil {
		t.Fatal(err)
	}
	if len(evs.Named("package.install")) != 1 || len(evs.Named("binary.rebuild")) != 1 {
		t.Fatalf("events = %+v", evs.All())
	}
}
