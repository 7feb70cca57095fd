package guardtest

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

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
	srv := httptest.NewServer(app)
	return &Registry{Server: srv, Host: strings.TrimPrefix(srv.URL, "http://"), app: app}, nil
}

// Close stops the server and the registry.
func (r *Registry) Close() {
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
