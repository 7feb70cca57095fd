package scripttest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// registrytls starts, in front of $REGISTRY, an https proxy whose
// certificate a private CA signed (httptest's), sets $REGTLS to its
// HOST:PORT, writes that CA's certificate to $WORK/registry-ca/ca.pem and
// signs $HOME in to it: a fleet's registry behind its own CA.
func cmdRegistryTLS(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registrytls")
	}
	target, err := url.Parse("http://" + ts.Getenv("REGISTRY"))
	ts.Check(err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("X-Forwarded-Proto", "https") // the registry's upload locations are https then
		proxy.ServeHTTP(w, r)
	}))
	ts.Defer(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")
	ts.Setenv("REGTLS", host)
	dir := ts.MkAbs("registry-ca")
	ts.Check(os.MkdirAll(dir, 0o755))
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	ts.Check(os.WriteFile(filepath.Join(dir, "ca.pem"), ca, 0o644))
	signIn(ts, host)
}

// signIn adds host to $HOME's docker login, as the test registry's user.
func signIn(ts *testscript.TestScript, host string) {
	file := filepath.Join(ts.Getenv("HOME"), ".docker", "config.json")
	var cfg struct {
		Auths map[string]map[string]string `json:"auths"`
	}
	data, err := os.ReadFile(file)
	ts.Check(err)
	ts.Check(json.Unmarshal(data, &cfg))
	cfg.Auths[host] = map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%s:%s", guardtest.RegistryUser, guardtest.RegistryPassword)))}
	data, err = json.Marshal(cfg)
	ts.Check(err)
	ts.Check(os.WriteFile(file, data, 0o600))
}

// hostilepush HOST/REPO pushes to the registry what a hostile party with
// push rights would: a stash- tag whose unsigned config carries escape
// sequences (ESC[8m hides the rest of the terminal, ESC[2J clears it) and
// whose annotations claim a signature by fleet-1 that signs nothing.
func cmdHostilePush(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: hostilepush HOST/REPO")
	}
	host, repo, _ := strings.Cut(args[0], "/")
	esc := "\x1b[8m\x1b[2J"
	cfg, err := json.Marshal(map[string]any{"recipe": "llama-cpp" + esc, "key": esc + strings.Repeat("e", 52), "source": esc, "compiler": esc, "files": []any{}})
	ts.Check(err)
	layer := []byte("guard-stash 1\nnot an entry\n")
	fakeSig := "fleet-1:" + base64.StdEncoding.EncodeToString(make([]byte, 64))
	man, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"artifactType":  "application/vnd.guard.stash.v1",
		"config":        pushBlob(ts, host, repo, "application/vnd.guard.stash.config.v1+json", cfg),
		"layers":        []any{pushBlob(ts, host, repo, "application/vnd.guard.stash.entry.v1", layer)},
		"annotations":   map[string]string{"dev.guard.stash.recipe": "llama-cpp" + esc, "dev.guard.stash.key": esc, "dev.guard.stash.signatures": fakeSig},
	})
	ts.Check(err)
	registryDo(ts, http.MethodPut, "http://"+host+"/v2/"+repo+"/manifests/stash-"+strings.Repeat("0", 32), "application/vnd.oci.image.manifest.v1+json", man)
}

// pushBlob pushes data as one blob (a monolithic upload, as the
// distribution spec describes it) and returns its descriptor.
func pushBlob(ts *testscript.TestScript, host, repo, mediaType string, data []byte) map[string]any {
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	resp := registryDo(ts, http.MethodPost, "http://"+host+"/v2/"+repo+"/blobs/uploads/", "", nil)
	loc, err := url.Parse(resp.Header.Get("Location"))
	ts.Check(err)
	base, _ := url.Parse("http://" + host + "/")
	loc = base.ResolveReference(loc)
	q := loc.Query()
	q.Set("digest", digest)
	loc.RawQuery = q.Encode()
	registryDo(ts, http.MethodPut, loc.String(), "application/octet-stream", data)
	return map[string]any{"mediaType": mediaType, "digest": digest, "size": len(data)}
}

// registryDo sends one request signed in as the test registry's user and
// fails the script unless the registry accepts it.
func registryDo(ts *testscript.TestScript, method, u, contentType string, body []byte) *http.Response {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	ts.Check(err)
	req.SetBasicAuth(guardtest.RegistryUser, guardtest.RegistryPassword)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	ts.Check(err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		ts.Fatalf("%s %s: %s %s", method, u, resp.Status, msg)
	}
	return resp
}

// registryproxy starts, in front of $REGISTRY, a proxy that can be taken
// down and brought back at the same address, sets $REGPROXY to its
// HOST:PORT and signs $HOME in to it; `registryproxy down` makes it answer
// every request 503 (a registry down for maintenance), `registryproxy up`
// passes them on again; `registryproxy hold` holds every request until
// `registryproxy release` (a restore caught while it runs).
func cmdRegistryProxy(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "usage: registryproxy [down|up|hold|release]"
	if neg || len(args) > 1 {
		ts.Fatalf(usage)
	}
	// The switches are files of the script's: a command has no other
	// place to keep them between calls.
	down, hold := ts.MkAbs("registryproxy.down"), ts.MkAbs("registryproxy.hold")
	if len(args) == 1 {
		switch args[0] {
		case "down":
			ts.Check(os.WriteFile(down, nil, 0o600))
		case "up":
			ts.Check(os.Remove(down))
		case "hold":
			ts.Check(os.WriteFile(hold, nil, 0o600))
		case "release":
			ts.Check(os.Remove(hold))
		default:
			ts.Fatalf(usage)
		}
		return
	}
	target, err := url.Parse("http://" + ts.Getenv("REGISTRY"))
	ts.Check(err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := os.Stat(hold); err != nil {
				break
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		if _, err := os.Stat(down); err == nil {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r) // the Host header stays the proxy's: the registry's upload locations name it
	}))
	ts.Defer(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	ts.Setenv("REGPROXY", host)
	signIn(ts, host) // as `docker login` would, beside the registry itself
}
