package manifest_test

import (
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/manifest"
)

var (
	sumA = strings.Repeat("ab", 32)
	sumB = strings.Repeat("01", 32)
)

func TestPinSHA256(t *testing.T) {
	tests := []struct {
		name, in, file, want string
	}{
		{
			name: "fills an empty value, keeps comments",
			in: "# top\n[[models]]\nfile = \"a.gguf\"   # local\nsize = 1\nsha256 = \"\"      # filled by pin\nrole = \"r\"\n\n" +
				"[[models]]\nfile = \"b.gguf\"\nsize = 2\nsha256 = \"\"\n",
			file: "b.gguf",
			want: "# top\n[[models]]\nfile = \"a.gguf\"   # local\nsize = 1\nsha256 = \"\"      # filled by pin\nrole = \"r\"\n\n" +
				"[[models]]\nfile = \"b.gguf\"\nsize = 2\nsha256 = \"" + sumA + "\"\n",
		},
		{
			name: "replaces an old sum",
			in:   "[[models]]\nfile = \"a.gguf\"\nsha256 = '" + sumB + "' # old\nsize = 1\n",
			file: "a.gguf",
			want: "[[models]]\nfile = \"a.gguf\"\nsha256 = \"" + sumA + "\" # old\nsize = 1\n",
		},
		{
			name: "adds the line after size, indented alike",
			in:   "[[models]]\n  file = \"a.gguf\"\n  size = 1  # bytes\n  role = \"r\"\n[swarm]\n",
			file: "a.gguf",
			want: "[[models]]\n  file = \"a.gguf\"\n  size = 1  # bytes\n  sha256 = \"" + sumA + "\"\n  role = \"r\"\n[swarm]\n",
		},
		{
			name: "adds the line after file when size is absent",
			in:   "[[models]]\nfile = \"a.gguf\"\n[models.budget]\nbase = \"1s\"\n",
			file: "a.gguf",
			want: "[[models]]\nfile = \"a.gguf\"\nsha256 = \"" + sumA + "\"\n[models.budget]\nbase = \"1s\"\n",
		},
		{
			name: "no newline at the end",
			in:   "[[models]]\nfile = \"a.gguf\"\nsize = 1",
			file: "a.gguf",
			want: "[[models]]\nfile = \"a.gguf\"\nsize = 1\nsha256 = \"" + sumA + "\"\n",
		},
		{
			name: "keeps CRLF",
			in:   "[[models]]\r\nfile = \"a.gguf\"\r\nsize = 1\r\n",
			file: "a.gguf",
			want: "[[models]]\r\nfile = \"a.gguf\"\r\nsize = 1\r\nsha256 = \"" + sumA + "\"\r\n",
		},
		{
			name: "inline model with a sha256 key",
			in:   "models = [{ file = \"a.gguf\", size = 1, sha256 = \"\" }]\n",
			file: "a.gguf",
			want: "models = [{ file = \"a.gguf\", size = 1, sha256 = \"" + sumA + "\" }]\n",
		},
		{
			name: "upper case sum is stored lower case",
			in:   "[[models]]\nfile = \"a.gguf\"\nsize = 1\n",
			file: "a.gguf",
			want: "[[models]]\nfile = \"a.gguf\"\nsize = 1\nsha256 = \"" + sumA + "\"\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum := sumA
			if strings.HasPrefix(tt.name, "upper") {
				sum = strings.ToUpper(sumA)
			}
			got, err := manifest.PinSHA256([]byte(tt.in), tt.file, sum)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestPinSHA256Default(t *testing.T) {
	in := manifest.DefaultTOML()
	out, err := manifest.PinSHA256(in, "DeepSeek-R1-Distill-Qwen-1.5B-Q4_K_M.gguf", sumA)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly one line differs.
	a, b := strings.Split(string(in), "\n"), strings.Split(string(out), "\n")
	if len(a) != len(b) {
		t.Fatalf("line count %d -> %d", len(a), len(b))
	}
	changed := 0
	for i := range a {
		if a[i] != b[i] {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("%d lines changed, want 1", changed)
	}
	m, err := manifest.Parse("pinned", out, "/h")
	if err != nil {
		t.Fatal(err)
	}
	if m.ModelByRole("r1").SHA256 != sumA || m.ModelByRole("q3").SHA256 != "" {
		t.Errorf("pinned the wrong model")
	}
}

func TestPinSHA256Errors(t *testing.T) {
	tests := []struct {
		name, in, file, sum, want string
	}{
		{"bad sum", "[[models]]\nfile = \"a.gguf\"\n", "a.gguf", "abc", `pin a.gguf: sha256 must be 64 hex characters, got "abc"`},
		{"no such model", "[[models]]\nfile = \"a.gguf\"\n", "b.gguf", sumA, `pin b.gguf: no [[models]] block with file = "b.gguf"`},
		{"duplicate", "[[models]]\nfile = \"a.gguf\"\n[[models]]\nfile = \"a.gguf\"\n", "a.gguf", sumA,
			`pin a.gguf: models[0] and models[1] both have file "a.gguf"`},
		{"not toml", "[[models]\n", "a.gguf", sumA, "pin a.gguf: manifest:1: "},
		{"inline without sha256", "models = [{ file = \"a.gguf\" }]\n", "a.gguf", sumA,
			"pin a.gguf: models[0] is not a [[models]] block; add sha256 = \"" + sumA + "\" by hand"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.PinSHA256([]byte(tt.in), tt.file, tt.sum)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got %v, want %s", err, tt.want)
			}
		})
	}
}
