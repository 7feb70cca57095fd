package openclaw

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const shim = "/home/u/.shim"

// options is a config at dir/.openclaw/openclaw.json holding text (none
// when text is nil) and a record in dir/state.
func options(t *testing.T, text *string) Options {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, ".openclaw", "openclaw.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if text != nil {
		if err := os.WriteFile(path, []byte(*text), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return Options{Config: Config{Path: path, Found: true}, ShimDir: shim, Record: filepath.Join(dir, "state", "openclaw-edit.json")}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr(s string) *string { return &s }

// TestWireEachShape adds the folder to each shape of config with one
// insertion, and uninstall gives the file back byte for byte.
func TestWireEachShape(t *testing.T) {
	for _, c := range []struct{ name, before, after string }{
		{"empty object", `{}`, `{"tools": {"exec": {"pathPrepend": ["/home/u/.shim"]}}}`},
		{"no tools", "// mine\n{\n  gateway: { port: 18789 }, // the port\n}\n",
			"// mine\n{\n  \"tools\": {\"exec\": {\"pathPrepend\": [\"/home/u/.shim\"]}},\n  gateway: { port: 18789 }, // the port\n}\n"},
		{"no exec", `{tools: {profile: 'full'}}`, `{tools: {"exec": {"pathPrepend": ["/home/u/.shim"]}, profile: 'full'}}`},
		{"empty exec", `{tools: {exec: {}}}`, `{tools: {exec: {"pathPrepend": ["/home/u/.shim"]}}}`},
		{"empty list", `{tools: {exec: {pathPrepend: []}}}`, `{tools: {exec: {pathPrepend: ["/home/u/.shim"]}}}`},
		{"one a line, as openclaw config set writes",
			"{\n  \"tools\": {\n    \"exec\": {\n      \"pathPrepend\": [\n        \"/opt/bin\"\n      ]\n    }\n  }\n}\n",
			"{\n  \"tools\": {\n    \"exec\": {\n      \"pathPrepend\": [\n        \"/home/u/.shim\",\n        \"/opt/bin\"\n      ]\n    }\n  }\n}\n"},
		{"a later duplicate key wins", `{tools: {exec: 1}, tools: {exec: {pathPrepend: ['/a']}}}`,
			`{tools: {exec: 1}, tools: {exec: {pathPrepend: ["/home/u/.shim", '/a']}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := options(t, &c.before)
			line, err := Wire(o)
			if err != nil || !strings.Contains(line, "added /home/u/.shim to tools.exec.pathPrepend") {
				t.Fatalf("Wire: %q, %v", line, err)
			}
			if got := read(t, o.Config.Path); got != c.after {
				t.Errorf("after install\n%s\nwant\n%s", got, c.after)
			}
			if fi, _ := os.Stat(o.Config.Path); fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want the file's own 0640 kept", fi.Mode().Perm())
			}
			if st := Check(o); !st.Protected {
				t.Errorf("status after install: %+v", st)
			}
			if line, err := Wire(o); line != "" || err != nil || read(t, o.Config.Path) != c.after {
				t.Errorf("a second install changed something: %q, %v", line, err)
			}
			if _, err := Unwire(o); err != nil {
				t.Fatal(err)
			}
			if got := read(t, o.Config.Path); got != c.before {
				t.Errorf("after uninstall\n%q\nwant it byte-identical to\n%q", got, c.before)
			}
			if _, err := os.Stat(o.Record); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the record is still there after uninstall: %v", err)
			}
		})
	}
}

// TestWireCreatesAConfig: OpenClaw's folder with no config gets one, 0600
// as OpenClaw writes it, and uninstall removes it again.
func TestWireCreatesAConfig(t *testing.T) {
	o := options(t, nil)
	if _, err := Wire(o); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"tools\": {\n    \"exec\": {\n      \"pathPrepend\": [\n        \"/home/u/.shim\"\n      ]\n    }\n  }\n}\n"
	if got := read(t, o.Config.Path); got != want {
		t.Errorf("created\n%s\nwant\n%s", got, want)
	}
	if fi, _ := os.Stat(o.Config.Path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := Unwire(o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.Config.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("uninstall left the config it created: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(o.Config.Path)); err != nil {
		t.Errorf("uninstall removed OpenClaw's own folder: %v", err)
	}
}

// TestWireCreatesTheFolder: with only `openclaw` on PATH, install makes
// OpenClaw's folder (0700, as OpenClaw does) and its config; uninstall
// removes both when nothing else was put there.
func TestWireCreatesTheFolder(t *testing.T) {
	o := options(t, nil)
	o.Config.Path = filepath.Join(filepath.Dir(o.Config.Path), "sub", "openclaw.json")
	if _, err := Wire(o); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Dir(o.Config.Path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder: %v, %v; want it made 0700", fi, err)
	}
	if _, err := Unwire(o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(o.Config.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("uninstall left the folder install made: %v", err)
	}
}

// TestUnwireAfterAChange: a config changed since install (here by
// OpenClaw's own config set, which rewrites the file) loses the entry
// alone; the rest stays as it is now.
func TestUnwireAfterAChange(t *testing.T) {
	o := options(t, ptr(`{tools: {exec: {pathPrepend: ['/a']}}}`))
	if _, err := Wire(o); err != nil {
		t.Fatal(err)
	}
	changed := "{\n  \"tools\": {\n    \"exec\": {\n      \"pathPrepend\": [\n        \"/home/u/.shim\",\n        \"/a\"\n      ],\n      \"timeoutSeconds\": 600\n    }\n  }\n}\n"
	if err := os.WriteFile(o.Config.Path, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	line, err := Unwire(o)
	if err != nil || !strings.Contains(line, "changed since guard install") {
		t.Fatalf("Unwire: %q, %v", line, err)
	}
	want := "{\n  \"tools\": {\n    \"exec\": {\n      \"pathPrepend\": [\n        \"/a\"\n      ],\n      \"timeoutSeconds\": 600\n    }\n  }\n}\n"
	if got := read(t, o.Config.Path); got != want {
		t.Errorf("after uninstall\n%s\nwant\n%s", got, want)
	}
}

// TestRefusals: a config that is a symlink, not a regular file, one that
// cannot be parsed or where the setting has another shape is never
// written; install says why in one line.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name, text, why string
		setup           func(t *testing.T, o Options)
	}{
		{name: "unparseable JSON", text: `{"tools": {"exec": }`, why: "cannot parse it either (line 1, column 20"},
		{name: "unparseable JSON5", text: "{\n  tools: { exec: { pathPrepend: ['/a' '/b'] } },\n}", why: "cannot parse it either (line 2"},
		{name: "not a list", text: `{tools: {exec: {pathPrepend: "/a"}}}`, why: "tools.exec.pathPrepend is not a list"},
		{name: "tools not an object", text: `{tools: []}`, why: "the config.tools is not an object"},
		{name: "a symlink", why: "it is a symlink", setup: func(t *testing.T, o Options) {
			real := filepath.Join(t.TempDir(), "real.json")
			if err := os.WriteFile(real, []byte(`{}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, o.Config.Path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a FIFO", why: "not a regular file", setup: func(t *testing.T, o Options) {
			if err := mkfifo(o.Config.Path); err != nil {
				t.Skipf("cannot make a FIFO here: %v", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := options(t, nil)
			if c.setup != nil {
				c.setup(t, o)
			} else if err := os.WriteFile(o.Config.Path, []byte(c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, o.Config.Path)
			_, err := Wire(o)
			var r *Refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), c.why) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Wire: %v; want one line saying %q", err, c.why)
			}
			if after := snapshot(t, o.Config.Path); after != before {
				t.Errorf("the config changed: %s, was %s", after, before)
			}
			if st := Check(o); st.Protected || st.Reason == "" || st.Fix == "" {
				t.Errorf("status %+v: want not protected, a reason and a fix", st)
			}
			if _, err := Unwire(o); !errors.As(err, &r) && err != nil {
				t.Errorf("Unwire: %v", err)
			}
			if after := snapshot(t, o.Config.Path); after != before {
				t.Errorf("uninstall changed the config: %s, was %s", after, before)
			}
		})
	}
}

// TestAnotherUsersConfig: a config, or its folder, that belongs to
// another user is never written, even by root.
func TestAnotherUsersConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	for _, what := range []string{"file", "folder"} {
		t.Run(what, func(t *testing.T) {
			o := options(t, ptr(`{}`))
			target := o.Config.Path
			if what == "folder" {
				target = filepath.Dir(o.Config.Path)
			}
			if err := os.Chown(target, uid, -1); err != nil {
				t.Fatal(err)
			}
			_, err := Wire(o)
			if !strings.Contains(fmt2(err), "belongs to another user (uid "+nobody.Uid+")") {
				t.Fatalf("Wire: %v", err)
			}
			if got := read(t, o.Config.Path); got != `{}` {
				t.Errorf("the config changed: %q", got)
			}
		})
	}
}

func fmt2(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// snapshot is what a refusal must leave unchanged: the entry's kind and,
// for a file or link, what it holds or points at.
func snapshot(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		return "absent"
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		l, _ := os.Readlink(path)
		b, _ := os.ReadFile(l)
		return "link to " + l + " holding " + string(b)
	case fi.Mode().IsRegular():
		return "file holding " + read(t, path)
	}
	return fi.Mode().String()
}

// TestWireMovesToANewShimDir: an install into another shim folder takes
// the old folder's entry out and puts the new one in.
func TestWireMovesToANewShimDir(t *testing.T) {
	before := `{tools: {exec: {pathPrepend: ['/a']}}}`
	o := options(t, &before)
	if _, err := Wire(o); err != nil {
		t.Fatal(err)
	}
	o.ShimDir = "/srv/shim"
	if _, err := Wire(o); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, o.Config.Path), `{tools: {exec: {pathPrepend: ["/srv/shim", '/a']}}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if _, err := Unwire(o); err != nil {
		t.Fatal(err)
	}
	if got := read(t, o.Config.Path); got != before {
		t.Errorf("after uninstall %s, want %s", got, before)
	}
}

// TestDecline: --no-openclaw is recorded, so status tells it from a
// config guard was never let near; it never touches the config.
func TestDecline(t *testing.T) {
	o := options(t, ptr(`{}`))
	if err := Decline(o); err != nil {
		t.Fatal(err)
	}
	if st := Check(o); st.Protected || !st.Declined {
		t.Errorf("status %+v, want declined and not protected", st)
	}
	if got := read(t, o.Config.Path); got != `{}` {
		t.Errorf("decline changed the config: %s", got)
	}
}

// TestFind resolves the config as OpenClaw does.
func TestFind(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if c := Find(home, getenv, ""); c.Found || c.Path != filepath.Join(home, ".openclaw", "openclaw.json") {
		t.Errorf("nothing there: %+v", c)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "openclaw"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if c := Find(home, getenv, bin); !c.Found || c.How != filepath.Join(bin, "openclaw") {
		t.Errorf("openclaw on PATH: %+v", c)
	}
	if err := os.MkdirAll(filepath.Join(home, ".clawdbot"), 0o700); err != nil {
		t.Fatal(err)
	}
	if c := Find(home, getenv, ""); !c.Found || c.Path != filepath.Join(home, ".clawdbot", "openclaw.json") {
		t.Errorf("only the older folder: %+v", c)
	}
	if err := os.MkdirAll(filepath.Join(home, ".openclaw"), 0o700); err != nil {
		t.Fatal(err)
	}
	if c := Find(home, getenv, ""); c.Path != filepath.Join(home, ".openclaw", "openclaw.json") {
		t.Errorf("both folders: %+v", c)
	}
	env["OPENCLAW_HOME"] = "~/svc"
	if c := Find(home, getenv, ""); c.Path != filepath.Join(home, "svc", ".openclaw", "openclaw.json") {
		t.Errorf("OPENCLAW_HOME: %+v", c)
	}
	env["OPENCLAW_STATE_DIR"] = "~/state"
	if c := Find(home, getenv, ""); c.Path != filepath.Join(home, "svc", "state", "openclaw.json") {
		t.Errorf("OPENCLAW_STATE_DIR: %+v", c)
	}
	env["OPENCLAW_CONFIG_PATH"] = "/etc/oc.json"
	if c := Find(home, getenv, ""); c.Path != "/etc/oc.json" {
		t.Errorf("OPENCLAW_CONFIG_PATH: %+v", c)
	}
	env["OPENCLAW_CONFIG_PATH"] = "undefined"
	if c := Find(home, getenv, ""); c.Path != filepath.Join(home, "svc", "state", "openclaw.json") {
		t.Errorf("OPENCLAW_CONFIG_PATH=undefined is unset for OpenClaw: %+v", c)
	}
}

// renameIn is OpenClaw writing its config as it does: its own version to
// a temporary file beside it, renamed over it. It runs in a goroutine of
// its own, as another process would, and returns once the rename is done.
func renameIn(t *testing.T, path, text string) {
	t.Helper()
	done := make(chan error)
	go func() {
		tmp := path + ".openclaw-tmp"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			done <- err
			return
		}
		done <- os.Rename(tmp, path)
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestEditKeepsAConcurrentChange: OpenClaw renames its own version of the
// config in between guard's read and guard's rename. Install and
// uninstall write only over the file they read: they make their edit
// again on OpenClaw's version, which keeps OpenClaw's change.
func TestEditKeepsAConcurrentChange(t *testing.T) {
	o := options(t, ptr(`{tools: {exec: {pathPrepend: ['/a']}}}`))
	theirs := `{tools: {exec: {pathPrepend: ['/a'], timeoutSeconds: 600}}}`
	renames := 0
	o.beforeRename = func() {
		if renames++; renames == 1 {
			renameIn(t, o.Config.Path, theirs)
		}
	}
	if _, err := Wire(o); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, o.Config.Path), `{tools: {exec: {pathPrepend: ["/home/u/.shim", '/a'], timeoutSeconds: 600}}}`; got != want {
		t.Fatalf("after install %s, want %s (OpenClaw's change kept and the entry added)", got, want)
	}
	theirs = `{tools: {exec: {pathPrepend: ["/home/u/.shim", '/a'], timeoutSeconds: 900}}}`
	renames = 0
	if _, err := Unwire(o); err != nil {
		t.Fatal(err)
	}
	if got, want := read(t, o.Config.Path), `{tools: {exec: {pathPrepend: ['/a'], timeoutSeconds: 900}}}`; got != want {
		t.Fatalf("after uninstall %s, want %s (OpenClaw's change kept and the entry removed)", got, want)
	}
}

// TestEditRefusedWhileTheConfigKeepsChanging: a config rewritten before
// every rename guard tries is left as its writer made it, and install
// says why in one line.
func TestEditRefusedWhileTheConfigKeepsChanging(t *testing.T) {
	o := options(t, ptr(`{}`))
	n := 0
	o.beforeRename = func() {
		n++
		renameIn(t, o.Config.Path, `{gateway: {port: `+strconv.Itoa(n)+`}}`)
	}
	_, err := Wire(o)
	var r *Refusal
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "it changed each of 3 times") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Wire: %v; want one line saying the file kept changing", err)
	}
	if got, want := read(t, o.Config.Path), `{gateway: {port: 3}}`; got != want {
		t.Errorf("the config is %s, want its writer's last version %s", got, want)
	}
}

// TestUnwireLeavesWhatGuardDidNotAdd: a shim folder already in
// pathPrepend before install (added by hand, as install's own hint says)
// is not guard's to remove; neither is one added after install
// --no-openclaw.
func TestUnwireLeavesWhatGuardDidNotAdd(t *testing.T) {
	handMade := `{tools: {exec: {pathPrepend: ['/home/u/.shim', '/a']}}}`
	o := options(t, &handMade)
	if line, err := Wire(o); err != nil || line != "" {
		t.Fatalf("Wire: %q, %v; want nothing to do", line, err)
	}
	if line, err := Unwire(o); err != nil || line != "" {
		t.Fatalf("Unwire: %q, %v; want nothing removed", line, err)
	}
	if got := read(t, o.Config.Path); got != handMade {
		t.Errorf("uninstall changed the config to %s, want it as it was: %s", got, handMade)
	}

	o = options(t, ptr(`{}`))
	if err := Decline(o); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.Config.Path, []byte(handMade), 0o600); err != nil {
		t.Fatal(err)
	}
	if line, err := Unwire(o); err != nil || line != "" {
		t.Fatalf("Unwire after --no-openclaw: %q, %v; want nothing removed", line, err)
	}
	if got := read(t, o.Config.Path); got != handMade {
		t.Errorf("uninstall after --no-openclaw changed the config to %s", got)
	}
}
