package registry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Ref{
		"oci://ghcr.io/acme/stash":            {Host: "ghcr.io", Repo: "acme/stash"},
		"oci://localhost:5000/models/q:v1":    {Host: "localhost:5000", Repo: "models/q", Reference: "v1"},
		"oci://r.example/m@sha256:" + hex64(): {Host: "r.example", Repo: "m", Reference: "sha256:" + hex64()},
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("String() = %q, want %q", got.String(), in)
		}
	}
	for _, bad := range []string{"https://ghcr.io/x", "oci://", "oci://host", "oci:///repo", "oci://h/r:", "oci://h/r@sha256:12", "oci://h/UPPER", "oci://h/r@md5:" + hex64()} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func hex64() string { return strings.Repeat("ab", 32) }

func FuzzParse(f *testing.F) {
	f.Add("oci://localhost:5000/models/q:v1")
	f.Add("oci://r.example/m@sha256:" + hex64())
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(r.String())
		if err != nil || again != r {
			t.Fatalf("%q parses to %+v, which does not round-trip (%+v, %v)", s, r, again, err)
		}
	})
}

func startRegistry(t *testing.T) *guardtest.Registry {
	t.Helper()
	reg, err := guardtest.NewRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// A push signs in with what `docker login` wrote, and a fetch gets back
// the same bytes, checked against their digests; without credentials the
// registry says no; a host not marked plain http is spoken to over https.
func TestPushFetchWithDockerCredentials(t *testing.T) {
	reg := startRegistry(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", "")
	ctx := context.Background()
	ref, err := Parse(Scheme + reg.Host + "/fleet/stash")
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{PlainHTTP: []string{reg.Host}}
	repo, err := c.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	layer := Blob{MediaType: "application/vnd.guard.test", Data: []byte("entry bytes")}
	config := Blob{MediaType: "application/vnd.guard.test.config+json", Data: []byte(`{"a":1}`)}
	if _, err := repo.Push(ctx, "t1", "application/vnd.guard.test.artifact", config, []Blob{layer}, map[string]string{"k": "v"}); err == nil {
		t.Fatal("an anonymous push was accepted")
	}

	if err := reg.DockerLogin(home); err != nil {
		t.Fatal(err)
	}
	repo, _ = c.Open(ref)
	dgst, err := repo.Push(ctx, "t1", "application/vnd.guard.test.artifact", config, []Blob{layer}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	m, err := repo.FetchManifest(ctx, "t1")
	if err != nil {
		t.Fatalf("fetch the manifest: %v", err)
	}
	if m.Digest != dgst || m.Annotations["k"] != "v" || len(m.Layers) != 1 || m.Layers[0].Digest != DigestOf(layer.Data) {
		t.Fatalf("manifest: %+v", m)
	}
	data, err := repo.FetchBlob(ctx, m.Layers[0], 1<<20)
	if err != nil || string(data) != "entry bytes" {
		t.Fatalf("blob: %q %v", data, err)
	}
	if _, err := repo.FetchBlob(ctx, m.Layers[0], 5); err == nil || !strings.Contains(err.Error(), "over 5") {
		t.Errorf("a blob over the limit: %v", err)
	}
	if _, err := repo.FetchManifest(ctx, "absent"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an absent tag: %v", err)
	}
	tags, err := repo.Tags(ctx)
	if err != nil || len(tags) != 1 || tags[0] != "t1" {
		t.Errorf("tags: %v %v", tags, err)
	}

	// Not marked plain http: https, which this server does not speak.
	https, _ := (&Client{}).Open(ref)
	if _, err := https.FetchManifest(ctx, "t1"); err == nil {
		t.Error("a host not marked plain http was read over http")
	}
}

// Credentials from a Docker credential helper (credsStore), as Docker
// Desktop, ECR and GCR set them up: the helper is asked, and its answer
// signs the push in.
func TestCredentialHelper(t *testing.T) {
	reg := startRegistry(t)
	home, bin := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", "")
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	helper := "#!/bin/sh\n[ \"$1\" = get ] || exit 1\nread server\necho \"$server\" >> " + filepath.Join(bin, "asked") + "\n" +
		"printf '{\"ServerURL\":\"%s\",\"Username\":\"" + guardtest.RegistryUser + "\",\"Secret\":\"" + guardtest.RegistryPassword + "\"}' \"$server\"\n"
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-guardtest"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".docker"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(`{"credsStore": "guardtest"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ref, _ := Parse(Scheme + reg.Host + "/fleet/helper")
	repo, err := (&Client{PlainHTTP: []string{reg.Host}}).Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Push(context.Background(), "t1", "application/vnd.guard.test.artifact", Blob{MediaType: "application/vnd.guard.test.config+json", Data: []byte("{}")}, []Blob{{MediaType: "application/vnd.guard.test", Data: []byte("x")}}, nil); err != nil {
		t.Fatalf("push with the helper's credentials: %v", err)
	}
	asked, err := os.ReadFile(filepath.Join(bin, "asked"))
	if err != nil || !strings.Contains(string(asked), reg.Host) {
		t.Errorf("the helper was not asked for %s: %q %v", reg.Host, asked, err)
	}
}

// A registry that sends a manifest whose GGUF layer has no valid digest
// gets a refusal, not a panic.
func TestModelLayerWithABadDigest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/manifests/") {
			body := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",` +
				`"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},` +
				`"layers":[{"mediaType":"application/vnd.docker.ai.gguf.v3","digest":"nocolon","size":10}]}`
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", digest.FromString(body).String())
			w.Write([]byte(body))
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ref, _ := Parse(Scheme + host + "/m:t")
	repo, err := (&Client{PlainHTTP: []string{host}}).Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.ModelLayer(context.Background()); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("a layer digest with no algorithm: %v", err)
	}
}
