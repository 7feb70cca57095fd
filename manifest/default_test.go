package manifest_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/manifest"
)

func parseDefault(t *testing.T) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Parse(manifest.EmbeddedSource, manifest.DefaultTOML(), "/home/u")
	if err != nil {
		t.Fatalf("default manifest: %v", err)
	}
	return m
}

func TestDefaultManifest(t *testing.T) {
	m := parseDefault(t)
	if m.Log != "/tmp/selfheal.log" || m.ShimDir != "/home/u/.shim" || m.ModelsDir != "/home/u" || m.StateDir != "/home/u/.cache/guard" {
		t.Errorf("paths: log %q shim %q models %q state %q", m.Log, m.ShimDir, m.ModelsDir, m.StateDir)
	}
	if m.Budget.Cap.D() != 300*time.Second || m.Budget.Heal.D() != 30*time.Minute || m.Budget.Grace.D() != 3*time.Second {
		t.Errorf("budget %+v", m.Budget)
	}
	if m.Cache.MaxBytes != 256<<20 || m.Cache.TTL != 0 {
		t.Errorf("cache %+v", m.Cache)
	}

	models := []struct {
		file, role, url string
		size            int64
		base            time.Duration
		tps             float64
		fallback        string
	}{
		{"Qwen2.5-0.5B-Instruct-Q5_K_M.gguf", "fast", "https://huggingface.co/second-state/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/Qwen2.5-0.5B-Instruct-Q5_K_M.gguf", 420086080, 30 * time.Second, 20, "q3"},
		{"Qwen3-0.6B-Q4_K_M.gguf", "q3", "https://huggingface.co/bartowski/Qwen_Qwen3-0.6B-GGUF/resolve/main/Qwen_Qwen3-0.6B-Q4_K_M.gguf", 484220320, 30 * time.Second, 20, ""},
		{"DeepSeek-R1-Distill-Qwen-1.5B-Q4_K_M.gguf", "r1", "https://huggingface.co/bartowski/DeepSeek-R1-Distill-Qwen-1.5B-GGUF/resolve/main/DeepSeek-R1-Distill-Qwen-1.5B-Q4_K_M.gguf", 1117320800, 45 * time.Second, 10, "q3"},
		{"Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf", "code", "https://huggingface.co/bartowski/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/main/Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf", 397808288, 30 * time.Second, 20, "q3"},
	}
	if len(m.Models) != len(models) {
		t.Fatalf("%d models, want %d", len(m.Models), len(models))
	}
	for i, want := range models {
		got := m.Models[i]
		if got.File != want.file || got.Size != want.size || got.Role != want.role || got.SHA256 != "" ||
			!slices.Equal(got.URLs, []string{want.url}) || got.Budget.Base.D() != want.base ||
			got.Budget.TokensPerSecond != want.tps || got.Fallback != want.fallback {
			t.Errorf("models[%d] = %+v", i, got)
		}
		if m.ModelByRole(want.role) != got || m.ModelByFile("/anywhere/"+want.file) != got {
			t.Errorf("models[%d] not found by role or file", i)
		}
	}
	if m.ModelsPath("x.gguf") != "/home/u/x.gguf" {
		t.Errorf("ModelsPath: %q", m.ModelsPath("x.gguf"))
	}
	if f := m.FallbackModel(m.ModelByRole("r1")); f == nil || f.Role != "q3" {
		t.Errorf("r1 falls back to %+v", f)
	}

	b := m.Builds["llama-cpp"]
	if b == nil || b.Name != "llama-cpp" || b.Dir != "/home/u/llama.cpp" || b.Repo != "https://github.com/ggml-org/llama.cpp" ||
		b.Timeout.D() != 30*time.Minute || len(b.Steps) != 2 || !slices.Contains(b.Steps[0], "-DGGML_NATIVE=ON") {
		t.Errorf("build %+v", b)
	}
	if p := b.Prebuilt; p == nil || p.GitHub != "ggml-org/llama.cpp" || p.Asset != "llama-{tag}-bin-ubuntu-{arch}.tar.gz" || p.SHA256 != "" || !p.BuildsNative() {
		t.Errorf("build's prebuilt %+v", p)
	}
	npx := m.Tool("npx")
	if npx == nil || !slices.Equal(npx.Args, []string{"--yes"}) || npx.Env["npm_config_yes"] != "true" ||
		npx.Package != "npm" || npx.Prompts != manifest.PromptsAnswer {
		t.Errorf("npx %+v", npx)
	}
	lc := m.Tool("llama-completion")
	if lc == nil || lc.Path != "/home/u/llama.cpp/build/bin/llama-completion" || lc.Build != "llama-cpp" ||
		!slices.Equal(lc.Fallback, []string{"llama-simple"}) || lc.Stall.D() != 45*time.Second || lc.Prompts != manifest.PromptsKill ||
		!slices.Equal(lc.Defaults, []string{"-t", "2", "-fa", "on", "--ctx-size", "2048"}) || lc.Cache != nil {
		t.Errorf("llama-completion %+v", lc)
	}
	ls := m.Tool("llama-simple")
	if ls == nil || ls.Path != "/home/u/llama.cpp/build/bin/llama-simple" || ls.Build != "llama-cpp" || ls.Prompts != manifest.PromptsKill {
		t.Errorf("llama-simple %+v", ls)
	}
	if m.Tool("nope") != nil || m.ModelByRole("") != nil || m.ModelByFile("") != nil {
		t.Error("lookups of missing names must return nil")
	}
	for _, cmd := range []string{"cmake", "g++", "curl", "git"} {
		if m.Packages[cmd] != cmd {
			t.Errorf("packages[%s] = %q", cmd, m.Packages[cmd])
		}
	}
	// The original tool's rule: a light prompt goes to SCOUT alone for 80
	// to 120 tokens.
	if m.Swarm.LightTokens < 80 || m.Swarm.LightTokens > 120 || m.Swarm.LightTokens != manifest.DefaultLightTokens || m.Swarm.FullTokens != manifest.DefaultFullTokens {
		t.Errorf("swarm answer lengths: light %d, full %d", m.Swarm.LightTokens, m.Swarm.FullTokens)
	}
	if m.Swarm.LightWords != 8 || m.Swarm.Roles["SAGE"] != "r1" || m.Swarm.Timeouts["SAGE"].D() != 150*time.Second {
		t.Errorf("swarm %+v", m.Swarm)
	}
	auth := m.Auth["clawhub"]
	if auth == nil || auth.Env != "CLAWHUB_CONFIG_PATH" || auth.Hint == "" || auth.For == "" ||
		!slices.Equal(auth.Files, []string{"/home/u/.clawhub/TOKEN", "/home/u/.config/clawhub/config.json"}) {
		t.Errorf("auth %+v", auth)
	}
}

func TestDefaultManifestCommentsPinning(t *testing.T) {
	text := string(manifest.DefaultTOML())
	if n := strings.Count(text, "# No sha256: checked against the one the Hub declares; `guard manifest pin --remote` writes it.\n[[models]]"); n != 4 {
		t.Errorf("%d pin comments, want one above each model", n)
	}
	if strings.Contains(text, "LLAMA_NATIVE") {
		t.Error("LLAMA_NATIVE is deprecated; use GGML_NATIVE")
	}
}

func TestDefaultTOMLIsACopy(t *testing.T) {
	a := manifest.DefaultTOML()
	a[0] = 'X'
	if manifest.DefaultTOML()[0] == 'X' {
		t.Error("DefaultTOML exposes the embedded bytes")
	}
}

func TestParseWithoutHomeKeepsTilde(t *testing.T) {
	m, err := manifest.Parse("m", manifest.DefaultTOML(), "")
	if err != nil {
		t.Fatal(err)
	}
	if m.ShimDir != "~/.shim" || m.ModelsDir != "~" {
		t.Errorf("shim %q models %q", m.ShimDir, m.ModelsDir)
	}
}

func TestExpandHome(t *testing.T) {
	for _, tt := range []struct{ p, home, want string }{
		{"~", "/h", "/h"},
		{"~/x/y", "/h", "/h/x/y"},
		{"~/", "/h", "/h"},
		{"/abs/~/x", "/h", "/abs/~/x"},
		{"~user/x", "/h", "~user/x"},
		{"rel", "/h", "rel"},
		{"", "/h", ""},
		{"~/x", "", ""}, // no home: no guess at the current folder
		{"~", "", ""},
	} {
		if got := manifest.ExpandHome(tt.p, tt.home); got != tt.want {
			t.Errorf("ExpandHome(%q, %q) = %q, want %q", tt.p, tt.home, got, tt.want)
		}
	}
}

func TestDefaultsForAnEmptyManifest(t *testing.T) {
	m, err := manifest.Parse("m", []byte("[builds.b]\ndir = \"~\"\nsteps = [[\"make\"]]\n[budget]\nheal = \"10m\"\n"), "/h")
	if err != nil {
		t.Fatal(err)
	}
	if m.Log != manifest.DefaultLog || m.StateDir != "/h/.cache/guard" || m.Budget.Cap != manifest.DefaultCap ||
		m.Budget.Grace != manifest.DefaultGrace || m.Swarm.LightWords != 8 || m.Cache.MaxBytes != 256<<20 {
		t.Errorf("defaults not applied: %+v", m)
	}
	if b := m.Builds["b"]; b.Dir != "/h" || b.Timeout.D() != 10*time.Minute {
		t.Errorf("build %+v: timeout should default to budget.heal", b)
	}
	if m.Source != "m" {
		t.Errorf("source %q", m.Source)
	}
}

func TestUserPath(t *testing.T) {
	if got := manifest.UserPath("/h"); got != "/h/.config/guard/manifest.toml" {
		t.Errorf("got %q", got)
	}
}

func TestLoad(t *testing.T) {
	home := t.TempDir()

	m, err := manifest.Load("", home)
	if err != nil || m.Source != manifest.EmbeddedSource || len(m.Models) != 4 {
		t.Fatalf("no user file: %v, source %q", err, m.Source)
	}

	user := filepath.Join(home, ".config", "guard", "manifest.toml")
	if err := os.MkdirAll(filepath.Dir(user), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(user, []byte("shim_dir = \"~/bin\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = manifest.Load("", home)
	if err != nil || m.Source != user || m.ShimDir != filepath.Join(home, "bin") || len(m.Models) != 0 {
		t.Fatalf("user file: %v, %+v", err, m)
	}

	if err := os.WriteFile(user, []byte("shim_dir = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = manifest.Load("", home)
	var me *manifest.Error
	if !errors.As(err, &me) || me.File != user || me.Line != 1 {
		t.Fatalf("bad user file: %v", err)
	}

	missing := filepath.Join(home, "missing.toml")
	if _, err := manifest.Load(missing, home); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("explicit missing file: %v", err)
	}

}

func TestEncodeRoundTrip(t *testing.T) {
	off := false
	rich := `log = "/var/log/g.log"
[packages]
"g++" = "g++"
[builds."odd name"]
dir = "~/src"
repo = "file:///srv/mirror.git"
needs = ["make"]
steps = [["make", "-j2"], ["make", "install"]]
targets = ["a", "b"]
stash_from = ["file:///srv/stash", "https://fleet.example/stash"]
[tools.t]
path = "/opt/t"
build = "odd name"
package = "t-tools"
args = ["--quiet"]
env = { "X_1" = "a b" }
fallback = ["u"]
timeout = "90s"
stall = "1h"
prompts = "kill"
defaults = ["-n", "1"]
cache = false
[tools.u]
[[models]]
file = "a.gguf"
size = 1
sha256 = "` + strings.Repeat("0a", 32) + `"
urls = ["http://127.0.0.1:1/a", "https://h/a"]
role = "x"
budget = { base = "1.5s", tokens_per_second = 2.5 }
[[models]]
file = "b.gguf"
size = 9007199254740993
fallback = "x"
[swarm]
light_words = 3
roles = { "A B" = "x" }
timeouts = { "A B" = "1ms" }
[auth.a]
files = ["/f"]
[cache]
max_bytes = 1
ttl = "24h"
[stash]
max_bytes = 2
[self]
urls = ["file:///srv/fleet/guard", "https://mirror.example/guard"]
sha256 = "` + strings.Repeat("AB", 32) + `"
`
	for name, doc := range map[string][]byte{"default": manifest.DefaultTOML(), "rich": []byte(rich)} {
		t.Run(name, func(t *testing.T) {
			m, err := manifest.Parse("in.toml", doc, "/home/u")
			if err != nil {
				t.Fatal(err)
			}
			if name == "rich" && (m.Tool("t").Cache == nil || *m.Tool("t").Cache != off) {
				t.Fatalf("cache switch lost: %+v", m.Tool("t"))
			}
			var buf bytes.Buffer
			if err := m.Encode(&buf); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(buf.String(), "# effective manifest, read from in.toml\n") {
				t.Errorf("no source comment:\n%s", buf.String())
			}
			back, err := manifest.Parse("in.toml", buf.Bytes(), "/elsewhere")
			if err != nil {
				t.Fatalf("%v\n%s", err, buf.String())
			}
			if !equalJSON(t, m, back) {
				t.Errorf("round trip changed the manifest:\n%s", buf.String())
			}
		})
	}
}

// TestInstalledManifest: the copy guard install writes is the default with
// a header that says it is the file to edit, not "Copy it to" the path it
// is already at; every value is the default's.
func TestInstalledManifest(t *testing.T) {
	text := manifest.InstalledTOML()
	if bytes.Contains(text, []byte("Copy it to")) || !bytes.HasPrefix(text, []byte("# guard's manifest, written by guard install")) {
		t.Fatalf("installed manifest begins %q", text[:bytes.IndexByte(text, '\n')+1])
	}
	installed, err := manifest.Parse(manifest.EmbeddedSource, text, "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := installed.Encode(&a); err != nil {
		t.Fatal(err)
	}
	if err := parseDefault(t).Encode(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("the installed manifest's values differ from the default's:\n%s\nwant\n%s", a.String(), b.String())
	}
	if bytes.Count(text, []byte("\n")) != bytes.Count(manifest.DefaultTOML(), []byte("\n")) {
		t.Error("the installed header has another number of lines than the default's, so file:line errors would not match manifest show's line numbers")
	}
}

// A [[models]] entry with no budget, as `guard model push` prints one, or
// with a rate and no base, gets the default base, so that its budget is
// never n / tps alone.
func TestAModelWithoutBudgetGetsADefaultBase(t *testing.T) {
	m, err := manifest.Parse("m", []byte(`[[models]]
file = "a.gguf"
size = 10
urls = ["oci://h/r:t"]

[[models]]
file = "b.gguf"
size = 10
budget = { tokens_per_second = 20 }
`), "/h")
	if err != nil {
		t.Fatal(err)
	}
	if b := m.Models[0].Budget; b.Base != manifest.DefaultModelBase || b.TokensPerSecond != 0 {
		t.Errorf("a model with no budget has %+v, want base %v and no rate", b, manifest.DefaultModelBase)
	}
	if b := m.Models[1].Budget; b.Base != manifest.DefaultModelBase || b.TokensPerSecond != 20 {
		t.Errorf("a model with a rate and no base has %+v, want base %v and its rate", b, manifest.DefaultModelBase)
	}
}
