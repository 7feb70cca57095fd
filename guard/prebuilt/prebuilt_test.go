package prebuilt

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/manifest"
)

const assetTemplate = "llama-{tag}-bin-ubuntu-{arch}.tar.gz"

// request is a Request for the checkout dir at commit, against a.
func request(t *testing.T, a *api, stateDir, dir, commit string) Request {
	return Request{
		Recipe:   "llama-cpp",
		Source:   &manifest.Prebuilt{GitHub: "ggml-org/llama.cpp", Asset: assetTemplate},
		Commit:   commit,
		Dir:      dir,
		Tools:    []string{"llama-completion", "llama-simple"},
		PathEnv:  os.Getenv("PATH"),
		Env:      []string{"PATH=" + os.Getenv("PATH")},
		StateDir: stateDir,
		Client:   &Client{Base: a.URL, Dir: APIDir(stateDir)},
		GOARCH:   "amd64",
	}
}

// A clean checkout at the commit a tag of the release names: the asset
// is downloaded, checked against the API's digest, unpacked into the
// state folder, its tools found and run; they answer.
func TestPrepareFromTheCheckoutsTag(t *testing.T) {
	a := newAPI(t)
	dir, head := checkout(t, 3)
	git(t, dir, "tag", "b7000")
	a.publish("b7000", head, "llama-b7000-bin-ubuntu-x64.tar.gz", releaseArchive(t, "b7000"), "body")
	stateDir := t.TempDir()
	ready, err := Prepare(context.Background(), request(t, a, stateDir, dir, head))
	if err != nil {
		t.Fatal(err)
	}
	if ready.Tag != "b7000" || ready.Kept || !strings.HasPrefix(ready.Dir, Root(stateDir)) {
		t.Errorf("ready %+v", ready)
	}
	out, err := exec.Command(ready.Tools["llama-completion"], "hi").Output()
	if err != nil || strings.TrimSpace(string(out)) != "prebuilt b7000 hi" {
		t.Errorf("the prebuilt tool said %q, %v", out, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "build")); err == nil {
		t.Error("the prebuilt was unpacked into the checkout")
	}
	// Ready now: no request, no download.
	again, ok := Look(stateDir, "llama-cpp", head, "amd64", []string{"llama-completion"})
	if !ok || !again.Kept || again.Tools["llama-completion"] != ready.Tools["llama-completion"] {
		t.Errorf("Look = %+v, %v", again, ok)
	}
	if asked := a.tagsAsked(); !slices.Equal(asked, []string{"b7000"}) {
		t.Errorf("asked %v", asked)
	}
}

// A full clone without tags names its candidate by its commit count, and
// the API's answer must confirm it names HEAD.
func TestPrepareByCommitCount(t *testing.T) {
	a := newAPI(t)
	dir, head := checkout(t, 3)
	a.publish("b3", head, "llama-b3-bin-ubuntu-arm64.tar.gz", releaseArchive(t, "b3"), "body")
	r := request(t, a, t.TempDir(), dir, head)
	r.GOARCH = "arm64"
	ready, err := Prepare(context.Background(), r)
	if err != nil || ready.Tag != "b3" {
		t.Fatalf("Prepare = %+v, %v", ready, err)
	}

	// The same count on another commit (a fork's): refused.
	b := newAPI(t)
	b.publish("b3", strings.Repeat("a", 40), "llama-b3-bin-ubuntu-x64.tar.gz", releaseArchive(t, "b3"), "body")
	_, err = Prepare(context.Background(), request(t, b, t.TempDir(), dir, head))
	if err == nil || !strings.Contains(err.Error(), "the release b3 is of commit aaaaaaaaaaaa") {
		t.Errorf("a release of another commit: %v", err)
	}
	// A release naming a branch cannot confirm a count.
	c := newAPI(t)
	c.publish("b3", "master", "llama-b3-bin-ubuntu-x64.tar.gz", releaseArchive(t, "b3"), "body")
	_, err = Prepare(context.Background(), request(t, c, t.TempDir(), dir, head))
	if err == nil || !strings.Contains(err.Error(), "names no commit to confirm the count by") {
		t.Errorf("a release naming a branch: %v", err)
	}
}

// A shallow clone has no commit count: no prebuilt, and no request.
func TestShallowCloneHasNoCandidate(t *testing.T) {
	a := newAPI(t)
	src, _ := checkout(t, 3)
	dir := filepath.Join(t.TempDir(), "shallow")
	if out, err := exec.Command("git", "clone", "-q", "--depth", "1", "file://"+src, dir).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	head := git(t, dir, "rev-parse", "HEAD")
	_, err := Prepare(context.Background(), request(t, a, t.TempDir(), dir, head))
	if err == nil || !strings.Contains(err.Error(), "shallow clone") {
		t.Errorf("a shallow clone: %v", err)
	}
	if asked := a.tagsAsked(); len(asked) != 0 {
		t.Errorf("asked the API %v", asked)
	}
}

// The asset's bytes are checked before anything runs: an asset whose
// bytes are not those the API declares, or that declares no digest
// (unless the manifest pins one), is refused, and nothing is unpacked.
func TestPrepareRefusesUnverifiedAssets(t *testing.T) {
	dir, head := checkout(t, 2)
	good := releaseArchive(t, "b2")
	tampered := releaseArchive(t, "b2-evil")
	for _, c := range []struct {
		name, digest, pin string
		body              []byte
		want              string
	}{
		{"tampered", "sha256:" + sum(good), "", tampered, "the download of llama-b2-bin-ubuntu-x64.tar.gz has sha256 " + sum(tampered)[:12] + ", not " + sum(good)[:12] + " as the release declares: refused"},
		{"no digest", "", "", good, "declares no sha256 of llama-b2-bin-ubuntu-x64.tar.gz and the manifest pins none"},
		{"a pin the digest contradicts", "sha256:" + sum(good), sum(tampered), good, "not the manifest's pin"},
		{"no digest, pinned", "", sum(good), good, ""},
		{"no digest, pinned, tampered", "", sum(good), tampered, "as the manifest pins: refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAPI(t)
			a.publish("b2", head, "llama-b2-bin-ubuntu-x64.tar.gz", c.body, c.digest)
			stateDir := t.TempDir()
			r := request(t, a, stateDir, dir, head)
			r.Source.SHA256 = c.pin
			ready, err := Prepare(context.Background(), r)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Prepare = %+v, %v; want %q", ready, err, c.want)
			}
			if m, _ := filepath.Glob(filepath.Join(Root(stateDir), "llama-cpp", "*")); slices.ContainsFunc(m, func(p string) bool {
				fi, err := os.Stat(p)
				return err == nil && fi.IsDir()
			}) {
				t.Errorf("something was unpacked: %v", m)
			}
		})
	}
}

// No asset for this machine: an architecture llama.cpp builds nothing for,
// or a release without this architecture's asset.
func TestNoAssetForThisMachine(t *testing.T) {
	a := newAPI(t)
	dir, head := checkout(t, 2)
	a.publish("b2", head, "llama-b2-bin-ubuntu-x64.tar.gz", releaseArchive(t, "b2"), "body")
	r := request(t, a, t.TempDir(), dir, head)
	r.GOARCH = "riscv64"
	if _, err := Prepare(context.Background(), r); err == nil || !strings.Contains(err.Error(), "no build for this machine's architecture") {
		t.Errorf("riscv64: %v", err)
	}
	r.GOARCH = "arm64"
	if _, err := Prepare(context.Background(), r); err == nil || !strings.Contains(err.Error(), "has no asset llama-b2-bin-ubuntu-arm64.tar.gz for this machine") {
		t.Errorf("arm64: %v", err)
	}
}

// One API request per tag per machine: a second sandbox sharing the state
// folder reads the first one's answer, a missing release and an
// unreachable API too.
func TestOneRequestPerTagPerMachine(t *testing.T) {
	a := newAPI(t)
	a.publish("b9", strings.Repeat("c", 40), "x.tar.gz", []byte("x"), "body")
	stateDir := t.TempDir()
	for i := range 3 {
		c := &Client{Base: a.URL, Dir: APIDir(stateDir)}
		rel, cached, err := c.Release(context.Background(), "ggml-org/llama.cpp", "b9")
		if err != nil || rel.Tag != "b9" || cached != (i > 0) {
			t.Errorf("sandbox %d: %+v cached %v, %v", i, rel, cached, err)
		}
		if _, _, err := c.Release(context.Background(), "ggml-org/llama.cpp", "b10"); !errors.Is(err, ErrNoRelease) {
			t.Errorf("sandbox %d: b10: %v", i, err)
		}
	}
	if asked := a.tagsAsked(); !slices.Equal(asked, []string{"b9", "b10"}) {
		t.Errorf("asked %v, want each tag once", asked)
	}

	// An API nobody answers: one failed request, remembered.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	for i := range 2 {
		c := &Client{Base: dead, Dir: APIDir(stateDir)}
		_, _, err := c.Release(context.Background(), "ggml-org/llama.cpp", "b9")
		if err == nil || !strings.Contains(err.Error(), "cannot be reached") || c.Requests != 1-i {
			t.Errorf("unreachable, try %d: %v, %d requests", i, err, c.Requests)
		}
	}
}

// An answer is asked again once its life is over.
func TestAnswerLife(t *testing.T) {
	a := newAPI(t)
	stateDir := t.TempDir()
	now := timeAt(0)
	c := &Client{Base: a.URL, Dir: APIDir(stateDir), now: func() timeT { return now }}
	c.Release(context.Background(), "ggml-org/llama.cpp", "b1")
	now = now.Add(NoneLife - 1)
	c.Release(context.Background(), "ggml-org/llama.cpp", "b1")
	now = now.Add(2)
	c.Release(context.Background(), "ggml-org/llama.cpp", "b1")
	if c.Requests != 2 {
		t.Errorf("%d requests, want 2: one, then one after the answer's life", c.Requests)
	}
}

// The checkout is exactly a release only as the stash key sees it clean.
func TestClean(t *testing.T) {
	for _, c := range []struct {
		source string
		env    []string
		commit string
		why    string
	}{
		{"git abc", nil, "abc", ""},
		{"git abc dirty 0123", nil, "", "the checkout has edits"},
		{"files 0123", nil, "", "not a git checkout"},
		{"git abc", []string{"CFLAGS=-O0"}, "", "the build's environment changes its result (CFLAGS=-O0)"},
	} {
		commit, why := Clean(c.source, c.env)
		if commit != c.commit || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
			t.Errorf("Clean(%q, %v) = %q, %q", c.source, c.env, commit, why)
		}
	}
}

// A tool that does not start, or a release none of whose CPU variants
// loads, is refused before a call uses it; the failure is remembered.
func TestHealthCheck(t *testing.T) {
	dir, head := checkout(t, 2)
	for _, c := range []struct {
		name, tool, want string
	}{
		{"loader fails", "#!/bin/sh\necho 'error while loading shared libraries: libllama.so.0' >&2\nexit 127\n", "does not start here"},
		{"no variant loads", "#!/bin/sh\necho 'version: 1'\n", "no CPU variant of ggml in the release loads on this CPU"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAPI(t)
			body := tarGz(t, []entry{
				{name: "llama-completion", body: c.tool, mode: 0o755},
				{name: "llama-simple", body: c.tool, mode: 0o755},
				{name: "libggml-cpu-x64.so", body: "lib"},
			})
			a.publish("b2", head, "llama-b2-bin-ubuntu-x64.tar.gz", body, "body")
			stateDir := t.TempDir()
			r := request(t, a, stateDir, dir, head)
			if _, err := Prepare(context.Background(), r); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Prepare: %v, want %q", err, c.want)
			}
			// Remembered: the next call does not download it again.
			a.mu.Lock()
			delete(a.assets, "llama-b2-bin-ubuntu-x64.tar.gz")
			a.mu.Unlock()
			if _, err := Prepare(context.Background(), r); err == nil || !strings.Contains(err.Error(), "tried again after an hour") {
				t.Errorf("second Prepare: %v", err)
			}
		})
	}
}

// A release that makes one of the recipe's two tools (llama.cpp's has no
// examples): it is made ready for the one it has, and says it lacks the
// other. A tool the archive was never searched for (the manifest gained
// it since) is not taken for one the release lacks: Look sends it back
// to Prepare, which searches the archive again.
func TestReleaseWithSomeOfTheTools(t *testing.T) {
	a := newAPI(t)
	dir, head := checkout(t, 2)
	tool := "#!/bin/sh\necho 'load_backend: loaded CPU backend from here'\necho made\n"
	a.publish("b2", head, "llama-b2-bin-ubuntu-x64.tar.gz", tarGz(t, []entry{
		{name: "llama-b2/llama-completion", body: tool, mode: 0o755},
		{name: "llama-b2/llama-server", body: tool, mode: 0o755},
		{name: "llama-b2/libggml-cpu-x64.so", body: "lib"},
	}), "body")
	stateDir := t.TempDir()
	ready, err := Prepare(context.Background(), request(t, a, stateDir, dir, head))
	if err != nil {
		t.Fatal(err)
	}
	if p, has := ready.Tool("llama-completion"); !has || !filepath.IsAbs(p) {
		t.Errorf("llama-completion: %q, %v", p, has)
	}
	if p, has := ready.Tool("llama-simple"); has {
		t.Errorf("llama-simple, which the release lacks: %q", p)
	}
	kept, ok := Look(stateDir, "llama-cpp", head, "amd64", []string{"llama-completion", "llama-simple"})
	if _, has := kept.Tool("llama-simple"); !ok || has {
		t.Errorf("Look for both tools: %v, has llama-simple %v", ok, has)
	}
	for name, p := range kept.Tools {
		if !filepath.IsAbs(p) {
			t.Errorf("Look's %s is %q, not a path", name, p)
		}
	}
	if _, ok := Look(stateDir, "llama-cpp", head, "amd64", []string{"llama-server"}); ok {
		t.Error("Look took llama-server, never searched for, as ready")
	}
	r := request(t, a, stateDir, dir, head)
	r.Tools = []string{"llama-completion", "llama-server"}
	again, err := Prepare(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if _, has := again.Tool("llama-server"); !has || again.Kept {
		t.Errorf("Prepare after the manifest gained llama-server: %+v", again)
	}
}

// llama.cpp's tools say nothing of their backends for --version: the CPU
// variant is asked for with -lv 4 --list-devices, as the real
// llama-completion answers it, and a tool that knows no such option
// (llama-simple prints its usage) counts for nothing.
func TestVariantAskedWithListDevices(t *testing.T) {
	dir, head := checkout(t, 2)
	a := newAPI(t)
	completion := "#!/bin/sh\ncase \"$*\" in\n*--list-devices*) echo \"load_backend: loaded CPU backend from ${0%/*}/libggml-cpu-x64.so\" >&2; echo 'Available devices:';;\n*--version*) ;;\n*) echo answer;;\nesac\n"
	simple := "#!/bin/sh\necho 'example usage:'\nexit 1\n"
	a.publish("b2", head, "llama-b2-bin-ubuntu-x64.tar.gz", tarGz(t, []entry{
		{name: "llama-completion", body: completion, mode: 0o755},
		{name: "llama-simple", body: simple, mode: 0o755},
		{name: "libggml-cpu-x64.so", body: "lib"},
	}), "body")
	if _, err := Prepare(context.Background(), request(t, a, t.TempDir(), dir, head)); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
}
