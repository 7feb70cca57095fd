package auth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-guard/guard/guard/auth"
	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/manifest"
)

func TestCheck(t *testing.T) {
	home := t.TempDir()
	token := filepath.Join(home, ".config", "clawhub", "config.json")
	guardtest.WriteFile(t, token, `{"token":"x"}`, 0o600)
	guardtest.WriteFile(t, filepath.Join(home, ".clawhub", "EMPTY"), "", 0o600)
	elsewhere := filepath.Join(t.TempDir(), "custom.json")
	guardtest.WriteFile(t, elsewhere, `{"token":"y"}`, 0o600)
	if err := os.MkdirAll(filepath.Join(home, ".clawhub", "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAWHUB_CONFIG_PATH": elsewhere, "GONE": filepath.Join(home, "nope"), "TILDE": "~/.config/clawhub/config.json"}
	getenv := func(k string) string { return env[k] }

	tests := []struct {
		name  string
		auth  *manifest.Auth
		ok    bool
		found string
	}{
		{"nil asks nothing", nil, true, ""},
		{"empty asks nothing", &manifest.Auth{Name: "x"}, true, ""},
		{"file present", &manifest.Auth{Files: []string{"~/.config/clawhub/config.json"}}, true, token},
		{"second file present", &manifest.Auth{Files: []string{"~/.clawhub/TOKEN", "~/.config/clawhub/config.json"}}, true, token},
		{"no file", &manifest.Auth{Files: []string{"~/.clawhub/TOKEN"}}, false, ""},
		{"empty file is no token", &manifest.Auth{Files: []string{"~/.clawhub/EMPTY"}}, false, ""},
		{"folder is no token", &manifest.Auth{Files: []string{"~/.clawhub/dir"}}, false, ""},
		{"env names a file", &manifest.Auth{Env: "CLAWHUB_CONFIG_PATH", Files: []string{"~/.clawhub/TOKEN"}}, true, elsewhere},
		{"env with ~", &manifest.Auth{Env: "TILDE"}, true, token},
		{"env names a missing file", &manifest.Auth{Env: "GONE"}, false, ""},
		{"env unset, file present", &manifest.Auth{Env: "UNSET", Files: []string{"~/.config/clawhub/config.json"}}, true, token},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, found := auth.Check(tt.auth, home, getenv)
			if ok != tt.ok || found != tt.found {
				t.Fatalf("Check = %v, %q; want %v, %q", ok, found, tt.ok, tt.found)
			}
		})
	}
	if ok, _ := auth.Check(&manifest.Auth{Files: []string{"~/.config/clawhub/config.json"}}, "", getenv); ok {
		t.Fatal("~ expanded without a home")
	}
}
