package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	orasreg "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// oras-go is the reference this client must agree with (docs/decisions.md,
// "guard's own registry client"): each test here has oras-go read what
// guard pushed and guard read what oras-go pushed, on the real
// distribution registry, signed in by Basic (its htpasswd) and by a Bearer
// token service in front of it.

// bearerFront is a token service and registry front of reg, as ghcr.io
// and Docker Hub are: a request without a token it issued is challenged
// (Bearer realm, service, scope), the realm gives a token for the scopes
// asked to the registry's user (a password by Basic, or an identity token
// by OAuth2's refresh grant), and a request with one is passed to reg
// signed in. The tokens it issued are counted.
type bearerFront struct {
	*httptest.Server
	Host   string
	issued atomic.Int32
	// refresh is the identity token it takes.
	refresh string
}

func startBearer(t *testing.T, reg *guardtest.Registry) *bearerFront {
	t.Helper()
	f := &bearerFront{refresh: "identity-token-of-fleet"}
	target, _ := url.Parse(reg.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		var scopes []string
		ok := false
		if r.Method == http.MethodPost {
			r.ParseForm()
			ok = r.PostForm.Get("grant_type") == "refresh_token" && r.PostForm.Get("refresh_token") == f.refresh
			scopes = strings.Fields(r.PostForm.Get("scope"))
		} else {
			u, p, has := r.BasicAuth()
			ok = has && u == guardtest.RegistryUser && p == guardtest.RegistryPassword
			scopes = r.URL.Query()["scope"]
		}
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`))
			return
		}
		f.issued.Add(1)
		json.NewEncoder(w).Encode(map[string]string{"token": "tok:" + strings.Join(scopes, " ")})
	})
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !strings.HasPrefix(tok, "tok:") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+f.URL+`/token",service="guard-test",scope="repository:`+repoOf(r.URL.Path)+`:pull"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.SetBasicAuth(guardtest.RegistryUser, guardtest.RegistryPassword)
		proxy.ServeHTTP(w, r)
	})
	f.Server = httptest.NewServer(mux)
	f.Host = strings.TrimPrefix(f.URL, "http://")
	t.Cleanup(f.Close)
	return f
}

// repoOf is the repository of a /v2/REPO/(manifests|blobs|tags)/… path.
func repoOf(path string) string {
	path = strings.TrimPrefix(path, "/v2/")
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.Index(path, sep); i >= 0 {
			return path[:i]
		}
	}
	return path
}

// orasRepo is oras-go's client of host/repo, signed in as the registry's
// user.
func orasRepo(t *testing.T, host, repo string) *remote.Repository {
	t.Helper()
	r, err := remote.NewRepository(host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	r.Client = &auth.Client{Cache: auth.NewCache(), Credential: auth.StaticCredential(host, auth.Credential{Username: guardtest.RegistryUser, Password: guardtest.RegistryPassword})}
	return r
}

func TestInteropWithOras(t *testing.T) {
	reg := startRegistry(t)
	front := startBearer(t, reg)
	for _, tc := range []struct {
		name, host string
	}{{"basic", reg.Host}, {"bearer", front.Host}} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("DOCKER_CONFIG", "")
			writeDockerConfig(t, home, `{"auths":{"`+tc.host+`":{"auth":"`+basicAuth(guardtest.RegistryUser, guardtest.RegistryPassword)+`"}}}`)
			ctx := context.Background()
			c := &Client{PlainHTTP: []string{tc.host}}
			ref, err := Parse(Scheme + tc.host + "/interop/" + tc.name)
			if err != nil {
				t.Fatal(err)
			}
			repo, err := c.Open(ref)
			if err != nil {
				t.Fatal(err)
			}
			or := orasRepo(t, tc.host, "interop/"+tc.name)

			// guard pushes, oras-go reads.
			layer := Blob{MediaType: "application/vnd.guard.test", Data: []byte("guard's layer")}
			cfg := Blob{MediaType: "application/vnd.guard.test.config+json", Data: []byte(`{"by":"guard"}`)}
			dgst, err := repo.Push(ctx, "by-guard", "application/vnd.guard.test.artifact", cfg, []Blob{layer}, map[string]string{"k": "v"})
			if err != nil {
				t.Fatalf("guard's push: %v", err)
			}
			desc, rc, err := or.FetchReference(ctx, "by-guard")
			if err != nil {
				t.Fatalf("oras-go reads guard's manifest: %v", err)
			}
			data, err := content.ReadAll(rc, desc)
			rc.Close()
			if err != nil || string(desc.Digest) != string(dgst) {
				t.Fatalf("oras-go read %s (%v), guard pushed %s", desc.Digest, err, dgst)
			}
			var om ocispec.Manifest
			if err := json.Unmarshal(data, &om); err != nil || om.ArtifactType != "application/vnd.guard.test.artifact" || om.Annotations["k"] != "v" || len(om.Layers) != 1 || om.MediaType != ocispec.MediaTypeImageManifest {
				t.Fatalf("oras-go reads guard's manifest as %+v (%v)", om, err)
			}
			got, err := content.FetchAll(ctx, or.Blobs(), om.Layers[0])
			if err != nil || string(got) != "guard's layer" {
				t.Fatalf("oras-go reads guard's layer: %q %v", got, err)
			}
			if got, err := content.FetchAll(ctx, or.Blobs(), om.Config); err != nil || string(got) != `{"by":"guard"}` {
				t.Fatalf("oras-go reads guard's config: %q %v", got, err)
			}

			// A model pushed by guard, its layer read by oras-go.
			model := filepath.Join(t.TempDir(), "m.gguf")
			os.WriteFile(model, []byte("GGUF model bytes"), 0o644)
			f, _ := os.Open(model)
			defer f.Close()
			mrepo, _ := c.Open(Ref{Host: tc.host, Repo: "interop/" + tc.name, Reference: "model"})
			md, size, err := mrepo.PushModel(ctx, f, "m.gguf")
			if err != nil || size != 16 {
				t.Fatalf("guard's model push: %v %d", err, size)
			}
			if got, err := content.FetchAll(ctx, or.Blobs(), ocispec.Descriptor{Digest: orasDigest(md), Size: size}); err != nil || string(got) != "GGUF model bytes" {
				t.Fatalf("oras-go reads guard's model layer: %q %v", got, err)
			}

			// oras-go pushes, guard reads.
			oLayer := []byte("oras's layer")
			ld := content.NewDescriptorFromBytes(MediaTypeGGUF, oLayer)
			if err := or.Push(ctx, ld, bytes.NewReader(oLayer)); err != nil {
				t.Fatal(err)
			}
			md2, err := oras.PackManifest(ctx, or, oras.PackManifestVersion1_1, "application/vnd.test.artifact", oras.PackManifestOptions{Layers: []ocispec.Descriptor{ld}, ManifestAnnotations: map[string]string{"by": "oras"}})
			if err != nil {
				t.Fatal(err)
			}
			if err := or.Tag(ctx, md2, "by-oras"); err != nil {
				t.Fatal(err)
			}
			m, err := repo.FetchManifest(ctx, "by-oras")
			if err != nil || string(m.Digest) != string(md2.Digest) || m.Annotations["by"] != "oras" || len(m.Layers) != 1 {
				t.Fatalf("guard reads oras-go's manifest: %+v %v", m, err)
			}
			if m2, err := repo.FetchManifest(ctx, string(md2.Digest)); err != nil || m2.Digest != m.Digest {
				t.Fatalf("guard reads oras-go's manifest by digest: %v", err)
			}
			if got, err := repo.FetchBlob(ctx, m.Layers[0], 1<<20); err != nil || string(got) != "oras's layer" {
				t.Fatalf("guard reads oras-go's layer: %q %v", got, err)
			}
			byTag, _ := c.Open(Ref{Host: tc.host, Repo: "interop/" + tc.name, Reference: "by-oras"})
			if l, err := byTag.ModelLayer(ctx); err != nil || string(l.Digest) != string(ld.Digest) {
				t.Fatalf("guard's model layer of oras-go's manifest: %+v %v", l, err)
			}
			byDigest, _ := c.Open(Ref{Host: tc.host, Repo: "interop/" + tc.name, Reference: string(ld.Digest)})
			if l, err := byDigest.ModelLayer(ctx); err != nil || l.Size != int64(len(oLayer)) {
				t.Fatalf("guard's model layer by digest: %+v %v", l, err)
			}
			// The ranged download's way: the blob's address through the
			// signed-in transport.
			req, _ := http.NewRequest(http.MethodGet, byDigest.BlobURL(Descriptor{Digest: Digest(ld.Digest)}), nil)
			req.Header.Set("Range", "bytes=7-")
			resp, err := (&http.Client{Transport: byDigest.Transport()}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			part := new(bytes.Buffer)
			part.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusPartialContent || part.String() != "layer" {
				t.Fatalf("a ranged read through Transport: %d %q", resp.StatusCode, part)
			}

			// Both list the same tags.
			tags, err := repo.Tags(ctx)
			var otags []string
			or.Tags(ctx, "", func(ts []string) error { otags = append(otags, ts...); return nil })
			if err != nil || strings.Join(tags, ",") != strings.Join(otags, ",") || len(tags) != 3 {
				t.Fatalf("tags: guard %v (%v), oras-go %v", tags, err, otags)
			}
		})
	}
	if front.issued.Load() == 0 {
		t.Error("the bearer front issued no token")
	}
}

func orasDigest(d Digest) digest.Digest { return digest.Digest(d) }

// A password the registry refuses is said to be refused, not that a
// sign-in is needed; a repository nothing was pushed to says so; no
// credentials at all ask for a sign-in. By Basic and by a token service.
func TestRefusalsAreTyped(t *testing.T) {
	reg := startRegistry(t)
	front := startBearer(t, reg)
	for _, tc := range []struct {
		name, host string
	}{{"basic", reg.Host}, {"bearer", front.Host}} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("HOME", home)
			t.Setenv("DOCKER_CONFIG", "")
			ctx := context.Background()
			c := &Client{PlainHTTP: []string{tc.host}}
			repo, _ := c.Open(Ref{Host: tc.host, Repo: "empty/" + tc.name})

			_, err := repo.Tags(ctx)
			if !errors.Is(err, ErrSignIn) || errors.Is(err, ErrCredentialsRefused) || !strings.Contains(err.Error(), "docker login "+tc.host) {
				t.Errorf("no credentials: %v", err)
			}

			writeDockerConfig(t, home, `{"auths":{"`+tc.host+`":{"auth":"`+basicAuth(guardtest.RegistryUser, "wrong")+`"}}}`)
			repo, _ = c.Open(Ref{Host: tc.host, Repo: "empty/" + tc.name})
			_, err = repo.Tags(ctx)
			if !errors.Is(err, ErrCredentialsRefused) || errors.Is(err, ErrSignIn) || !strings.Contains(err.Error(), "the credentials were refused") {
				t.Errorf("a refused password: %v", err)
			}

			writeDockerConfig(t, home, `{"auths":{"`+tc.host+`":{"auth":"`+basicAuth(guardtest.RegistryUser, guardtest.RegistryPassword)+`"}}}`)
			repo, _ = c.Open(Ref{Host: tc.host, Repo: "empty/" + tc.name})
			tags, err := repo.Tags(ctx)
			if !errors.Is(err, ErrNothingPushed) {
				t.Errorf("a repository nothing was pushed to: %v %v", tags, err)
			}
			if _, err := repo.FetchManifest(ctx, "absent"); !errors.Is(err, ErrNotFound) {
				t.Errorf("a tag of it: %v", err)
			}
		})
	}
}

// The credentials of Docker's config as Docker and oras-go find them: a
// legacy https://HOST/ key of auths, a credHelpers entry over credsStore,
// and an identity token traded for a token by OAuth2's refresh grant.
func TestDockerCredentialForms(t *testing.T) {
	reg := startRegistry(t)
	front := startBearer(t, reg)
	ctx := context.Background()
	push := func(t *testing.T, host, repo string) error {
		r, _ := (&Client{PlainHTTP: []string{host}}).Open(Ref{Host: host, Repo: repo})
		_, err := r.Push(ctx, "t", "application/vnd.guard.test.artifact", Blob{MediaType: MediaTypeEmptyJSON, Data: []byte("{}")}, []Blob{{MediaType: "application/vnd.guard.test", Data: []byte(repo)}}, nil)
		return err
	}
	t.Run("legacy key", func(t *testing.T) {
		home := t.TempDir()
		t.Setenv("HOME", home)
		t.Setenv("DOCKER_CONFIG", "")
		writeDockerConfig(t, home, `{"auths":{"http://`+reg.Host+`/v1/":{"auth":"`+basicAuth(guardtest.RegistryUser, guardtest.RegistryPassword)+`"}}}`)
		if err := push(t, reg.Host, "forms/legacy"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("identity token", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("DOCKER_CONFIG", dir)
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{"`+front.Host+`":{"identitytoken":"`+front.refresh+`"}}}`), 0o600)
		if err := push(t, front.Host, "forms/identity"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("credHelpers over credsStore", func(t *testing.T) {
		home, bin := t.TempDir(), t.TempDir()
		t.Setenv("HOME", home)
		t.Setenv("DOCKER_CONFIG", "")
		t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
		os.WriteFile(filepath.Join(bin, "docker-credential-wrong"), []byte("#!/bin/sh\necho credentials not found in native keychain\nexit 1\n"), 0o755)
		os.WriteFile(filepath.Join(bin, "docker-credential-right"), []byte("#!/bin/sh\nread s\nprintf '{\"ServerURL\":\"%s\",\"Username\":\""+guardtest.RegistryUser+"\",\"Secret\":\""+guardtest.RegistryPassword+"\"}' \"$s\"\n"), 0o755)
		writeDockerConfig(t, home, `{"credsStore":"wrong","credHelpers":{"`+reg.Host+`":"right"}}`)
		if err := push(t, reg.Host, "forms/helpers"); err != nil {
			t.Fatal(err)
		}
		// The store alone has none: anonymous, and asked to sign in.
		writeDockerConfig(t, home, `{"credsStore":"wrong"}`)
		if err := push(t, reg.Host, "forms/helpers"); !errors.Is(err, ErrSignIn) {
			t.Fatalf("a helper without credentials: %v", err)
		}
	})
}

// Parse accepts exactly the references oras-go's parser does, of the forms
// guard reads (oci://HOST/REPO, :TAG, @sha256:HEX).
func TestParseAgreesWithOras(t *testing.T) {
	for _, s := range parseCorpus() {
		checkAgainstOras(t, s)
	}
}

func FuzzParseAgreesWithOras(f *testing.F) {
	for _, s := range parseCorpus() {
		f.Add(s)
	}
	f.Fuzz(checkAgainstOras)
}

func parseCorpus() []string {
	long := strings.Repeat("t", 128)
	return []string{
		"h/r", "h:5000/a/b/c", "h/r:v1", "h/r:" + long, "h/r:" + long + "x", "h/r:.x", "h/r:-x", "h/r:_x", "h/r:X.Y-z",
		"h/a.b", "h/a..b", "h/a_b", "h/a__b", "h/a___b", "h/a-b", "h/a---b", "h/a-", "h/-a", "h/a._b", "h/a/", "h//a", "h/A",
		"h/r@sha256:" + hex64(), "h/r@sha256:" + strings.ToUpper(hex64()), "h/r@sha256:12", "h/r@sha512:" + hex64() + hex64(),
		"[::1]:5000/r", "h:port/r", "h h/r", "h%20/r", "user@h/r", "h/r:t:u", "h/r@", "h/r:",
	}
}

func checkAgainstOras(t *testing.T, s string) {
	if _, path, _ := strings.Cut(s, "/"); strings.Contains(path, "@") && strings.Contains(strings.SplitN(path, "@", 2)[0], ":") {
		// REPO:TAG@DIGEST: oras-go drops the tag; guard's references
		// never carry both, and Parse refuses it.
		return
	}
	_, err := Parse(Scheme + s)
	theirs, oerr := orasreg.ParseReference(s)
	if oerr == nil && strings.Contains(s, "@") && !strings.HasPrefix(theirs.Reference, "sha256:") {
		oerr = errors.New("guard reads sha256 digests only")
	}
	if oerr == nil && theirs.Reference == "" && strings.HasSuffix(s, ":") {
		oerr = errors.New("an empty tag")
	}
	if (err == nil) != (oerr == nil) {
		t.Errorf("%q: guard says %v, oras-go says %v", s, err, oerr)
	}
}

func writeDockerConfig(t *testing.T, home, cfg string) {
	t.Helper()
	os.MkdirAll(filepath.Join(home, ".docker"), 0o700)
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func basicAuth(user, pass string) string {
	req, _ := http.NewRequest("GET", "http://x", nil)
	req.SetBasicAuth(user, pass)
	return strings.TrimPrefix(req.Header.Get("Authorization"), "Basic ")
}

// A registry whose challenge names a token service on plain http (a
// host not marked plain) gets no password sent there.
func TestNoCredentialsToAPlainHTTPTokenService(t *testing.T) {
	var asked atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	defer tokens.Close()
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+tokens.URL+`/token",service="s"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", "")
	writeDockerConfig(t, home, `{"auths":{"`+host+`":{"auth":"`+basicAuth("u", "p")+`"}}}`)
	repo, _ := (&Client{PlainHTTP: []string{host}}).Open(Ref{Host: host, Repo: "r"})
	if _, err := repo.Tags(context.Background()); err == nil || !strings.Contains(err.Error(), "plain http token service") {
		t.Fatalf("a plain http token service: %v", err)
	}
	if asked.Load() != 0 {
		t.Fatal("the plain http token service was asked")
	}
}
