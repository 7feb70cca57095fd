package registry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sandbox-guard/guard/guard/state"
)

// credential is what signs a request in: a user and password, an
// identity token (OAuth2 refresh token) or a registry token used as is.
type credential struct {
	Username, Password string
	RefreshToken       string
	AccessToken        string
}

// maxDockerConfig bounds ~/.docker/config.json.
const maxDockerConfig = 4 << 20

// dockerConfig is the part of Docker's config.json that holds credentials.
type dockerConfig struct {
	Auths       map[string]dockerAuth `json:"auths"`
	CredsStore  string                `json:"credsStore"`
	CredHelpers map[string]string     `json:"credHelpers"`
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// serverAddress is the key Docker stores a registry's credentials under:
// Docker Hub's is its old v1 address.
func serverAddress(host string) string {
	if host == "docker.io" {
		return "https://index.docker.io/v1/"
	}
	return host
}

// dockerConfigPath is DOCKER_CONFIG/config.json, else
// ~/.docker/config.json.
func dockerConfigPath() string {
	if dir := os.Getenv("DOCKER_CONFIG"); dir != "" {
		return filepath.Join(dir, "config.json")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker", "config.json")
}

// dockerCredential finds host's credentials as Docker and ORAS do: the
// credential helper credHelpers names for it, else the credsStore helper,
// else the auths entry (its key the host, or a legacy https://HOST/ URL).
// No config, an unreadable one, or no entry: none, and the registry is
// asked anonymously, as docker pull would.
func dockerCredential(ctx context.Context, host string) (credential, error) {
	path := dockerConfigPath()
	if path == "" {
		return credential{}, nil
	}
	data, err := state.ReadRegular(path, maxDockerConfig, false)
	if errors.Is(err, fs.ErrNotExist) {
		return credential{}, nil
	}
	var cfg dockerConfig
	if err != nil || json.Unmarshal(data, &cfg) != nil {
		return credential{}, nil
	}
	server := serverAddress(host)
	if helper := cfg.CredHelpers[server]; helper != "" {
		return helperCredential(ctx, helper, server)
	}
	if cfg.CredsStore != "" {
		return helperCredential(ctx, cfg.CredsStore, server)
	}
	a, ok := cfg.Auths[server]
	if !ok {
		for key, entry := range cfg.Auths {
			if hostname(key) == server {
				a, ok = entry, true
				break
			}
		}
	}
	if !ok {
		return credential{}, nil
	}
	c := credential{Username: a.Username, Password: a.Password, RefreshToken: a.IdentityToken, AccessToken: a.RegistryToken}
	if a.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return credential{}, fmt.Errorf("%s: the auth of %s is not base64", path, server)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return credential{}, fmt.Errorf("%s: the auth of %s is not USER:PASSWORD", path, server)
		}
		c.Username, c.Password = user, pass
	}
	return c, nil
}

// hostname is the host of a legacy auths key such as https://HOST/v1/.
func hostname(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "http://"), "https://")
	host, _, _ := strings.Cut(key, "/")
	return host
}

// helperCredential asks docker-credential-NAME for server's credentials
// (the helper protocol: "get", the server on stdin, JSON on stdout). A
// helper that has none says "credentials not found": anonymous.
func helperCredential(ctx context.Context, name, server string) (credential, error) {
	cmd := exec.CommandContext(ctx, "docker-credential-"+name, "get")
	cmd.Stdin = strings.NewReader(server)
	var out bytes.Buffer
	cmd.Stdout = &limited{w: &out, n: 1 << 20}
	if err := cmd.Run(); err != nil {
		if strings.Contains(out.String(), "credentials not found") {
			return credential{}, nil
		}
		return credential{}, fmt.Errorf("docker-credential-%s get %s: %w: %s", name, server, err, strings.TrimSpace(out.String()))
	}
	var got struct {
		Username string
		Secret   string
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		return credential{}, fmt.Errorf("docker-credential-%s get %s: not its JSON answer: %w", name, server, err)
	}
	if got.Username == "<token>" {
		return credential{RefreshToken: got.Secret}, nil
	}
	return credential{Username: got.Username, Password: got.Secret}, nil
}

// limited writes up to n bytes to w and drops the rest.
type limited struct {
	w interface{ Write([]byte) (int, error) }
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	k := min(len(p), l.n)
	l.n -= k
	if k > 0 {
		if _, err := l.w.Write(p[:k]); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
