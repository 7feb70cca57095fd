package prebuilt

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// entry is one file of a test archive.
type entry struct {
	name, body, link string
	mode             int64
	typ              byte
}

// tarGz packs entries.
func tarGz(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.body)), Typeflag: e.typ, Linkname: e.link}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// releaseArchive is a release laid out as llama.cpp's: a folder with the
// tools, a shared library and a CPU variant library beside them.
func releaseArchive(t *testing.T, tag string) []byte {
	t.Helper()
	tool := "#!/bin/sh\necho \"load_backend: loaded CPU backend from $(dirname \"$0\")/libggml-cpu-x64.so\" >&2\necho \"prebuilt " + tag + " $*\"\n"
	return tarGz(t, []entry{
		{name: "build/", typ: tar.TypeDir, mode: 0o755},
		{name: "build/bin/", typ: tar.TypeDir, mode: 0o755},
		{name: "build/bin/llama-completion", body: tool, mode: 0o755},
		{name: "build/bin/llama-simple", body: tool, mode: 0o755},
		{name: "build/bin/libggml-cpu-x64.so", body: "not really a library"},
		{name: "build/bin/libllama.so", link: "libllama.so.0", typ: tar.TypeSymlink},
		{name: "build/bin/libllama.so.0", body: "lib"},
	})
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// api is a stand-in for GitHub's releases API and its downloads.
type api struct {
	*httptest.Server
	mu       sync.Mutex
	releases map[string]Release // by tag
	assets   map[string][]byte  // by asset name
	asked    []string           // the tags asked, in order
}

func newAPI(t *testing.T) *api {
	a := &api{releases: map[string]Release{}, assets: map[string][]byte{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if tag, ok := strings.CutPrefix(r.URL.Path, "/repos/ggml-org/llama.cpp/releases/tags/"); ok {
			a.asked = append(a.asked, tag)
			rel, ok := a.releases[tag]
			if !ok {
				http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
				return
			}
			json.NewEncoder(w).Encode(rel)
			return
		}
		if name, ok := strings.CutPrefix(r.URL.Path, "/download/"); ok {
			if body, ok := a.assets[name]; ok {
				http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(a.Close)
	return a
}

// publish adds a release of tag at commit with asset served as body and
// declared with digest ("" = none; "body" = body's own).
func (a *api) publish(tag, commit, asset string, body []byte, digest string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if digest == "body" {
		digest = "sha256:" + sum(body)
	}
	a.releases[tag] = Release{Tag: tag, Commit: commit, Assets: []Asset{
		{Name: asset, Size: int64(len(body)), Digest: digest, URL: a.URL + "/download/" + asset},
	}}
	a.assets[asset] = body
}

func (a *api) tagsAsked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// checkout is a git checkout with n commits; it returns its folder and HEAD.
func checkout(t *testing.T, n int) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: these cases need a checkout")
	}
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	for i := range n {
		os.WriteFile(filepath.Join(dir, "main.c"), []byte(strings.Repeat("x", i+1)), 0o644)
		git(t, dir, "add", ".")
		git(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "c")
	}
	return dir, git(t, dir, "rev-parse", "HEAD")
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

type timeT = time.Time

func timeAt(s int64) time.Time { return time.Unix(1_800_000_000+s, 0) }
