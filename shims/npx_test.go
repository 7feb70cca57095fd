package shims_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/shims"
)

func TestNpxArgs(t *testing.T) {
	yes := []string{"--yes"}
	tests := []struct {
		name   string
		args   string
		forced []string
		want   string
	}{
		{"plain package", "cowsay hi", yes, "--yes cowsay hi"},
		{"package flag --yes belongs to the package", "cowsay --yes hi", yes, "--yes cowsay --yes hi"},
		{"package flag -y belongs to the package", "cowsay -y", yes, "--yes cowsay -y"},
		{"no args", "", yes, "--yes"},
		{"already --yes", "--yes cowsay", yes, "--yes cowsay"},
		{"already -y", "-y cowsay", yes, "-y cowsay"},
		{"-y -y harmless", "-y -y cowsay", yes, "-y -y cowsay"},
		{"--yes=true", "--yes=true cowsay", yes, "--yes=true cowsay"},
		{"--no respected", "--no cowsay", yes, "--no cowsay"},
		{"--no-yes respected", "--no-yes cowsay", yes, "--no-yes cowsay"},
		{"--yes=false respected", "--yes=false cowsay", yes, "--yes=false cowsay"},
		{"--no-install respected", "--no-install cowsay", yes, "--no-install cowsay"},
		{"--yes after -p value", "-p cowsay --yes cowsay hi", yes, "-p cowsay --yes cowsay hi"},
		{"-p takes the next word", "-p cowsay cowsay --yes", yes, "--yes -p cowsay cowsay --yes"},
		{"--package=", "--package=cowsay cowsay", yes, "--yes --package=cowsay cowsay"},
		{"--package word", "--package cowsay -y cowsay", yes, "--package cowsay -y cowsay"},
		{"-c takes a dash word", "-c -y", yes, "--yes -c -y"},
		{"--call takes a dash word", "--call -y", yes, "--yes --call -y"},
		{"-c then --yes", "-c 'cowsay hi' --yes", yes, "-c 'cowsay hi' --yes"},
		{"-- ends options", "-- -y", yes, "--yes -- -y"},
		{"-- after a switch", "--quiet -- cowsay --yes", yes, "--yes --quiet -- cowsay --yes"},
		{"switch then package", "--quiet cowsay --yes", yes, "--yes --quiet cowsay --yes"},
		{"-q expands to --loglevel warn", "-q cowsay --yes", yes, "--yes -q cowsay --yes"},
		{"unknown flag eats a word", "--registry http://r cowsay", yes, "--yes --registry http://r cowsay"},
		{"unknown flag before a flag", "--foo -y cowsay", yes, "--foo -y cowsay"},
		{"-y=false is --yes false", "-y=false cowsay", yes, "-y=false cowsay"},
		{"-n removed with its value", "-n -y cowsay", yes, "--yes -n -y cowsay"},
		{"dash alone reads as a flag to npx", "- -y", yes, "- -y"},
		{"nil forced is --yes", "cowsay", nil, "--yes cowsay"},
		{"empty forced adds nothing", "cowsay", []string{}, "cowsay"},
		{"forced -y matches --yes", "--yes cowsay", []string{"-y"}, "--yes cowsay"},
		{"forced --no matches -y", "-y cowsay", []string{"--no"}, "-y cowsay"},
		{"forced repeats once", "cowsay", []string{"--yes", "-y", "--yes"}, "--yes cowsay"},
		{"forced value pair", "cowsay", []string{"--loglevel", "error", "--yes"}, "--loglevel error --yes cowsay"},
		{"forced pair skipped as a whole", "--loglevel=warn cowsay", []string{"--loglevel", "error", "--yes"}, "--yes --loglevel=warn cowsay"},
		{"forced -q matches --loglevel", "--loglevel silly cowsay", []string{"-q"}, "--loglevel silly cowsay"},
		{"stray forced word ignored", "cowsay", []string{"oops", "--yes"}, "--yes cowsay"},
		{"forced -- ignored", "cowsay", []string{"--", "--yes"}, "--yes cowsay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := fields(tt.args)
			before := slices.Clone(args)
			got := shims.NpxArgs(args, tt.forced)
			if !slices.Equal(got, fields(tt.want)) {
				t.Errorf("NpxArgs(%q, %q) = %q, want %q", args, tt.forced, got, fields(tt.want))
			}
			if !slices.Equal(args, before) {
				t.Errorf("NpxArgs changed its input: %q", args)
			}
		})
	}
}

func TestForceArgs(t *testing.T) {
	tests := []struct {
		args, forced, want string
	}{
		{"run x", "--yes", "--yes run x"},
		{"--yes run", "--yes", "--yes run"},
		{"--no-yes run", "--yes", "--no-yes run"},
		{"--yes=false run", "--yes", "--yes=false run"},
		{"run --yes", "--yes", "--yes run --yes"},
		{"-- --yes", "--yes", "--yes -- --yes"},
		{"- --yes", "--yes", "--yes - --yes"},
		{"-q run", "--yes --quiet", "--yes --quiet -q run"},
		{"--color=never run", "--no-color", "--color=never run"},
		{"", "--batch", "--batch"},
		{"x", "", "x"},
	}
	for _, tt := range tests {
		got := shims.ForceArgs(fields(tt.args), fields(tt.forced))
		if !slices.Equal(got, fields(tt.want)) {
			t.Errorf("ForceArgs(%q, %q) = %q, want %q", tt.args, tt.forced, got, tt.want)
		}
	}
}

// fields splits on spaces, keeping 'single quoted' words together, so that
// tables read like the command lines they stand for.
func fields(s string) []string {
	out := []string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '\'' {
			end := strings.IndexByte(s[1:], '\'')
			if end >= 0 {
				out = append(out, s[1:end+1])
				s = s[end+2:]
				continue
			}
		}
		word, rest, _ := strings.Cut(s, " ")
		out = append(out, word)
		s = rest
	}
	return out
}

func TestForced(t *testing.T) {
	tests := []struct {
		name, args, forced string
		tty                bool
		want               string
	}{
		{"npx", "cowsay hi", "", false, "--yes cowsay hi"},
		{"npx", "cowsay", "--yes --loglevel error", false, "--yes --loglevel error cowsay"},
		{"llama-completion", "-m m.gguf -p hi", "", false, "-m m.gguf -p hi -no-cnv"},
		{"llama-completion", "-m m.gguf -cnv", "", true, "-m m.gguf -cnv"},
		{"llama-completion", "-m m.gguf -i", "", false, "-m m.gguf -no-cnv"},
		{"llama-completion", "-m", "", false, "-m"},
		{"jq", ".a", "-M", false, "-M .a"},
		{"jq", ".a", "", false, ".a"},
	}
	for _, tt := range tests {
		args := fields(tt.args)
		before := slices.Clone(args)
		var forced []string // unset in the manifest
		if tt.forced != "" {
			forced = fields(tt.forced)
		}
		got := shims.Forced(tt.name, args, forced, tt.tty)
		if !slices.Equal(got, fields(tt.want)) {
			t.Errorf("Forced(%s, %q, %q, %v) = %q, want %q", tt.name, tt.args, tt.forced, tt.tty, got, tt.want)
		}
		if !slices.Equal(args, before) {
			t.Errorf("Forced changed its input: %q", args)
		}
	}
}
