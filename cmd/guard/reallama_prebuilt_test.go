package main

// TestRealLlamaPrebuilt: nothing cached anywhere, the first answer from a
// release build laid out as llama.cpp's own (docs/prebuilt.md). Opt-in:
//
//	GUARD_REAL_LLAMA_RELEASE=/path/to/llama.cpp go test -run TestRealLlamaPrebuilt ./cmd/guard
//
// names a llama.cpp git checkout (a full clone: its release tag is b and
// its commit count) whose build/bin was built as llama.cpp's release
// workflow builds it, one CPU variant library per x86 or arm level beside
// the binaries (docs/contributing.md gives the commands):
//
//	cmake -B build -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON \
//	  -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON
//
// The test packs build/bin with the workflow's own tar command (its
// entries under llama-TAG/), without llama-simple (the release is built
// without examples), and serves it, with the release of that tag, from a
// stand-in for GitHub's API on 127.0.0.1. A fresh clone of the checkout,
// whose outputs never existed, then makes its first call through guard:
// the API request, the download, the sha256, the unpacking, each tool's
// run, and the answer. native = false: the figure is the prebuilt's alone
// (a cold build's is TestRealLlamaColdBuild's). The model is in place: the
// model's own heal is TestRealLlama's.

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

func TestRealLlamaPrebuilt(t *testing.T) {
	root := os.Getenv("GUARD_REAL_LLAMA_RELEASE")
	if root == "" {
		t.Skip("opt-in: set GUARD_REAL_LLAMA_RELEASE to a llama.cpp checkout built as its release is (see docs/contributing.md)")
	}
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		t.Skipf("llama.cpp publishes no Linux build for %s", runtime.GOARCH)
	}
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "build", "bin")
	if st, err := os.Stat(filepath.Join(bin, "llama-completion")); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("GUARD_REAL_LLAMA_RELEASE=%s: no executable build/bin/llama-completion (%v)", root, err)
	}
	if variants, _ := filepath.Glob(filepath.Join(bin, "libggml-cpu-*.so")); len(variants) < 2 {
		t.Fatalf("GUARD_REAL_LLAMA_RELEASE=%s: build/bin has %d CPU variant libraries; build it with -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON", root, len(variants))
	}
	git := func(dir string, args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v in %s: %v", args, dir, err)
		}
		return strings.TrimSpace(string(out))
	}
	if git(root, "rev-parse", "--is-shallow-repository") == "true" {
		t.Fatalf("GUARD_REAL_LLAMA_RELEASE=%s is a shallow clone: it has no commit count, so no release tag", root)
	}
	tag, head := "b"+git(root, "rev-list", "--count", "HEAD"), git(root, "rev-parse", "HEAD")

	// The release workflow's own packing: tar -czvf ASSET --transform
	// "s,^\.,llama-TAG," -C ./build/bin .
	asset := "llama-" + tag + "-bin-ubuntu-" + arch + ".tar.gz"
	dl := t.TempDir()
	start := time.Now()
	if out, err := exec.Command("tar", "-czf", filepath.Join(dl, asset), "--exclude=./llama-simple",
		"--transform", "s,^\\.,llama-"+tag+",", "-C", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("pack %s: %v\n%s", asset, err, out)
	}
	body, err := os.ReadFile(filepath.Join(dl, asset))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes, packed in %s", asset, len(body), time.Since(start).Round(time.Millisecond))

	var requests atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/repos/ggml-org/llama.cpp/releases/tags/" + tag:
			requests.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"tag_name": tag, "target_commitish": head,
				"assets": []map[string]any{{
					"name": asset, "size": len(body), "digest": "sha256:" + guardtest.Sum(body),
					"browser_download_url": srv.URL + "/dl/" + asset,
				}},
			})
		case "/dl/" + asset:
			http.ServeFile(w, r, filepath.Join(dl, asset)) // with Range, as GitHub's
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	// A sandbox where nothing of the build exists: a fresh clone at the
	// same commit (no tags, as a plain clone of llama.cpp's main has
	// none at HEAD; the count names the release).
	model := guardtest.LlamaGGUF(1)
	e := newFaultEnv(t, "").With("GUARD_CACHE=off", "GITHUB_API_URL="+srv.URL)
	clone := filepath.Join(e.Home, "llama.cpp")
	if out, err := exec.Command("git", "clone", "-q", "--no-tags", root, clone).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	if got := git(clone, "rev-parse", "HEAD"); got != head {
		t.Fatalf("the clone is at %s, not %s", got, head)
	}
	m := realLlamaManifest(clone, model, true) + `
[builds.llama-cpp.prebuilt]
github = "ggml-org/llama.cpp"
asset = "llama-{tag}-bin-ubuntu-{arch}.tar.gz"
native = false
`
	e.WriteManifest(m)
	e.LinkShims()
	mpath := filepath.Join(e.Home, "models", "tiny.gguf")
	guardtest.WriteFile(t, mpath, string(model), 0o644)

	// 128 tokens, --ignore-eos: llama-completion's logger, which prints
	// the answer from a thread of its own, loses all of it at exit in most
	// runs of 8 tokens on this tiny model, and the fewer the longer the
	// answer (docs/llama-calls.md); guard tries such a call once more,
	// then its fallback, which this release lacks.
	first := e.Run("llama-completion", "-m", mpath, "-p", "hello", "-n", "128", "--ignore-eos")
	if first.Code != 0 || first.Stdout == "" {
		t.Fatalf("the first call: %s", first)
	}
	if !strings.Contains(first.Stderr, "llama-completion answers from the release "+tag+" of ggml-org/llama.cpp (native = false: no build)") {
		t.Fatalf("the first call does not say it answers from the release: %s", first)
	}
	// The release's llama-completion, where guard unpacked it, loads its
	// CPU variant from its own folder (ggml names the library by the
	// executable's resolved path, and says so only at the debug level).
	state, err := filepath.EvalSymlinks(e.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	unpacked := filepath.Join(state, "prebuilt", "llama-cpp", head+"-"+arch, "llama-"+tag)
	var out []byte
	for try := 0; try < 3 && !strings.Contains(string(out), "loaded CPU backend from "); try++ {
		// (that same logger loses the line in about 1 run of 40)
		out, err = exec.Command(filepath.Join(unpacked, "llama-completion"), "-lv", "4", "--list-devices").CombinedOutput()
	}
	variant := loadedVariant(string(out))
	if err != nil || !strings.Contains(string(out), "loaded CPU backend from "+unpacked+"/libggml-cpu-") {
		t.Fatalf("the unpacked llama-completion loaded no CPU variant of its own folder %s (%v):\n%s", unpacked, err, out)
	}
	evs := logEvents(t, e.Log, "binary.prebuilt")
	if len(evs) != 1 || evs[0]["result"] != "ok" {
		t.Fatalf("binary.prebuilt events: %v", evs)
	}
	if _, err := os.Stat(filepath.Join(clone, "build")); err == nil {
		t.Fatal("the prebuilt was put into the checkout's outputs")
	}
	t.Logf("from nothing to the first answer: %s (the release fetched, checked, unpacked and run in %v ms; %d-byte asset; CPU variant: %s)",
		first.Elapsed.Round(time.Millisecond), evs[0]["duration_ms"], len(body), variant)

	again := e.Run("llama-completion", "-m", mpath, "-p", "hello again", "-n", "128", "--ignore-eos")
	if again.Code != 0 || again.Stdout == "" || strings.Contains(again.Stderr, "release") {
		t.Fatalf("the second call, from the kept prebuilt, with nothing to say of it: %s", again)
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d API requests for two calls, want 1", n)
	}
	t.Logf("the next call, from the kept prebuilt: %s", again.Elapsed.Round(time.Millisecond))

	w := e.RunPath(e.Guard, "which", "llama-simple")
	if !strings.Contains(w.Stdout, "the release "+tag+" has no llama-simple: its calls build it natively") {
		t.Errorf("guard which llama-simple: %s", w)
	}
}

// loadedVariant is the CPU variant library ggml said it loaded.
func loadedVariant(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if _, p, ok := strings.Cut(l, "loaded CPU backend from "); ok {
			return filepath.Base(strings.TrimSpace(p))
		}
	}
	return "none named"
}
