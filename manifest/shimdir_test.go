package manifest_test

import (
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/manifest"
)

func TestSetShimDir(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"replaces the value, keeps the comment", "# mine\nshim_dir = \"~/.shim\"  # where\n[tools.a]\n",
			"# mine\nshim_dir = '/opt/shims'  # where\n[tools.a]\n"},
		{"adds a line after the header comment", "# mine\n\n[tools.a]\n", "# mine\n\nshim_dir = '/opt/shims'\n[tools.a]\n"},
		{"before the first key", "log = \"/l\"\n", "shim_dir = '/opt/shims'\nlog = \"/l\"\n"},
		{"empty file", "", "shim_dir = '/opt/shims'\n"},
		{"comment without a final newline", "# only", "# only\nshim_dir = '/opt/shims'\n"},
		{"the default manifest", string(manifest.DefaultTOML()),
			strings.Replace(string(manifest.DefaultTOML()), `shim_dir = "~/.shim"`, `shim_dir = '/opt/shims'`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := manifest.SetShimDir([]byte(tt.in), "/opt/shims")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			m, err := manifest.Parse("m.toml", got, "/home/u")
			if err != nil || m.ShimDir != "/opt/shims" {
				t.Errorf("parsed back: %v %v", m, err)
			}
		})
	}
	for _, bad := range []string{"", "/it's", "/a\nb"} {
		if _, err := manifest.SetShimDir([]byte("log = \"/l\"\n"), bad); err == nil {
			t.Errorf("SetShimDir(%q) took it", bad)
		}
	}
	if _, err := manifest.SetShimDir([]byte("[tools.a\n"), "/x"); err == nil {
		t.Error("a manifest that does not parse was edited")
	}
}
