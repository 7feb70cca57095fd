package guardtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"

	// The registry's in-memory storage and its htpasswd sign-in register
	// themselves when imported.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

// Registry is a real OCI registry (CNCF distribution) served in-process
// over plain http on 127.0.0.1, with in-memory storage and one user
// (RegistryUser, RegistryPassword) signed in by htpasswd: what a fleet
// runs, without the network.
type Registry struct {
	*httptest.Server
	Host string // 127.0.0.1:PORT
	app  *handlers.App

	fault    atomic.Pointer[BlobFault]
	blobGets atomic.Int64 // GETs of a blob since the last SetFault
	frozen   atomic.Bool  // a Freeze fault struck: every later blob GET hangs
	release  chan struct{}
	once     sync.Once
}

// BlobFault is what a Registry does to the bodies of the blobs it serves
// (GET .../blobs/sha256:...), to play a registry gone wrong.
type BlobFault struct {
	// Tamper flips the byte at this offset of every blob body served
	// (negative: none): a blob whose bytes are not its digest.
	Tamper int64
	// Freeze stops a blob body after this many bytes (negative: never)
	// and answers nothing more, the connection held open until Close;
	// every later blob GET then hangs before its answer: a registry
	// frozen mid-pull (SIGSTOP).
	Freeze int64
}

// SetFault makes the registry serve its blobs with f (nil: as they are)
// and starts counting blob GETs afresh.
func (r *Registry) SetFault(f *BlobFault) {
	r.fault.Store(f)
	r.blobGets.Store(0)
	r.frozen.Store(false)
}

// BlobGets is how many GETs of a blob the registry had since SetFault.
func (r *Registry) BlobGets() int64 { return r.blobGets.Load() }

func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/blobs/sha256:") {
		r.app.ServeHTTP(w, req)
		return
	}
	r.blobGets.Add(1)
	f := r.fault.Load()
	if f == nil {
		r.app.ServeHTTP(w, req)
		return
	}
	if f.Freeze >= 0 && r.frozen.Load() {
		<-r.release
		return
	}
	fw := &faultWriter{ResponseWriter: w, f: *f, release: r.release, frozen: &r.frozen}
	r.app.ServeHTTP(fw, req)
}

// faultWriter applies a BlobFault to a body as it is written. A Range
// answer's offsets count from its own first byte.
type faultWriter struct {
	http.ResponseWriter
	f       BlobFault
	off     int64
	stopped bool
	frozen  *atomic.Bool
	release chan struct{}
}

func (w *faultWriter) Write(p []byte) (int, error) {
	if w.stopped {
		<-w.release
		return 0, io.ErrClosedPipe
	}
	n := len(p)
	if w.f.Freeze >= 0 && w.off+int64(len(p)) > w.f.Freeze {
		p = p[:max(w.f.Freeze-w.off, 0)]
		w.stopped = true
		w.frozen.Store(true)
	}
	if t := w.f.Tamper - w.off; w.f.Tamper >= 0 && t >= 0 && t < int64(len(p)) {
		p = append([]byte(nil), p...)
		p[t] ^= 0xff
	}
	if _, err := w.ResponseWriter.Write(p); err != nil {
		return 0, err
	}
	w.off += int64(len(p))
	if w.stopped {
		if fl, ok := w.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		<-w.release
		return 0, io.ErrClosedPipe
	}
	return n, nil
}

func (w *faultWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// The one user of a test Registry.
const (
	RegistryUser     = "fleet"
	RegistryPassword = "fleet-secret"
)

// NewRegistry starts a registry; dir holds its htpasswd file. Close it
// when done.
func NewRegistry(dir string) (*Registry, error) {
	hash, err := bcrypt.GenerateFromPassword([]byte(RegistryPassword), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(RegistryUser+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	logrus.SetOutput(io.Discard) // the registry logs every request
	config := &configuration.Configuration{
		Storage: configuration.Storage{"inmemory": configuration.Parameters{}, "delete": configuration.Parameters{"enabled": true}},
		Auth:    configuration.Auth{"htpasswd": configuration.Parameters{"realm": "guard-test", "path": htpasswd}},
	}
	config.HTTP.Secret = "guard-test-secret"
	app := handlers.NewApp(context.Background(), config)
	r := &Registry{app: app, release: make(chan struct{})}
	r.Server = httptest.NewServer(r)
	r.Host = strings.TrimPrefix(r.Server.URL, "http://")
	return r, nil
}

// Close stops the server and the registry, a frozen answer first.
func (r *Registry) Close() {
	r.once.Do(func() { close(r.release) })
	r.Server.CloseClientConnections()
	r.Server.Close()
	_ = r.app.Shutdown()
}

// DockerLogin writes home/.docker/config.json holding the registry's
// user, as `docker login` would.
func (r *Registry) DockerLogin(home string) error {
	dir := filepath.Join(home, ".docker")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	auth := base64Std(RegistryUser + ":" + RegistryPassword)
	cfg := fmt.Sprintf(`{"auths": {%q: {"auth": %q}}}`, r.Host, auth)
	return os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600)
}

func base64Std(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// SignedInRegistry starts a registry for the test, closed at its end, and
// signs the test's process in to it: HOME is a temporary folder holding
// the docker login, DOCKER_CONFIG unset. The test cannot run in parallel.
func SignedInRegistry(t *testing.T) *Registry {
	t.Helper()
	reg, err := NewRegistry(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", "")
	if err := reg.DockerLogin(home); err != nil {
		t.Fatal(err)
	}
	return reg
}
