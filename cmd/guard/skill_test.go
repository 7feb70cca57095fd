package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/manifest"
)

// skillMeta is metadata.openclaw as the OpenClaw skill format defines it.
// Decoding is strict because OpenClaw silently ignores a key it does not
// know: a typo would drop the installer without a word.
type skillMeta struct {
	OpenClaw struct {
		Emoji    string   `json:"emoji"`
		OS       []string `json:"os"`
		Requires struct {
			Bins    []string `json:"bins"`
			AnyBins []string `json:"anyBins"`
		} `json:"requires"`
		Install []struct {
			ID      string   `json:"id"`
			Kind    string   `json:"kind"`
			Label   string   `json:"label"`
			OS      []string `json:"os"`
			Bins    []string `json:"bins"`
			Package string   `json:"package"`
			Module  string   `json:"module"`
			URL     string   `json:"url"`
			Archive string   `json:"archive"`
			Extract bool     `json:"extract"`
			SHA256  string   `json:"sha256"`
		} `json:"install"`
	} `json:"openclaw"`
}

// TestOpenClawSkill checks docs/openclaw/guard: a text-only folder whose
// SKILL.md frontmatter parses the way OpenClaw reads it (single-line keys,
// metadata a one-line JSON object); whose gating does not need the guard
// binary (a sandbox that evicted guard is when the skill is needed, and
// OpenClaw hides a skill whose binary is missing from the model), so it
// lists no installers (guard-install does); whose description starts with
// when to use it; whose install steps name the verified installer and
// ./install.sh; and whose body teaches how to run a long heal under
// OpenClaw's exec tool,
// guard install, status and heal, the exit statuses, and what guard status
// says on a fresh install and what a full heal costs, as they are.
func TestOpenClawSkill(t *testing.T) {
	t.Parallel()
	root := repoRoot()
	dir := filepath.Join(root, "docs", "openclaw", "guard")
	skillTextOnly(t, dir)

	data, err := os.ReadFile(filepath.Join(dir, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	front, body, err := skillFrontmatter(data)
	if err != nil {
		t.Fatal(err)
	}

	if front["name"] != filepath.Base(dir) {
		t.Errorf("name %q, want the folder's name %q", front["name"], filepath.Base(dir))
	}
	if !regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`).MatchString(front["name"]) {
		t.Errorf("name %q is not kebab-case", front["name"])
	}
	desc := front["description"]
	if len(desc) < 40 || len(desc) > 1024 || strings.ContainsAny(desc, "<>") {
		t.Errorf("description must be 40-1024 characters without angle brackets, got %d: %q", len(desc), desc)
	}
	// OpenClaw cuts a description to about 220 characters in a small
	// prompt: when to use the skill comes first.
	for _, word := range []string{"npx", "llama-completion", "evict", "not found"} {
		if !strings.Contains(desc[:min(len(desc), 220)], word) {
			t.Errorf("the description's first 220 characters do not say %q, so an agent shown the cut description would not know when to use the skill", word)
		}
	}

	oc := skillMetadata(t, front["metadata"]).OpenClaw
	for _, bin := range append(oc.Requires.Bins, oc.Requires.AnyBins...) {
		if bin == "guard" {
			t.Errorf("the skill requires the guard binary: OpenClaw hides it from the model exactly when a sandbox evicted guard")
		}
	}
	checkOS(t, oc.OS)
	if len(oc.Install) != 0 {
		t.Errorf("the guard skill lists installers %v: OpenClaw offers installers only for a missing required binary, so they belong in guard-install", oc.Install)
	}
	// Under OpenClaw's exec tool: how to wait for a long heal past exec's
	// backgrounding and timeout, and GUARD_TIMEOUT through exec's env.
	flat := strings.Join(strings.Fields(body), " ") // a phrase may wrap
	for _, want := range []string{"`background: true`", "`timeoutSeconds`", "`tools.exec.timeoutSeconds`", "`process` tool",
		`"env": {"GUARD_TIMEOUT"`, "`tools.exec.pathPrepend`", "guard install --no-openclaw"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the skill's body does not say %s", want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "install.sh")); err != nil || !strings.Contains(body, "./install.sh") || !strings.Contains(body, "/releases/latest/download/install.sh | sh") {
		t.Errorf("the skill's install steps must be the release's verified installer and this repository's ./install.sh (%v)", err)
	}
	// The exit statuses agree with the README: a bad manifest makes a shim
	// call run the tool unguarded, never 125; only chmod +x fixes 126.
	for _, row := range strings.Split(body, "\n") {
		if strings.HasPrefix(row, "| 126 |") && (!strings.Contains(row, "chmod +x") || strings.Contains(row, "then `guard heal`")) {
			t.Errorf("the 126 row must say chmod +x fixes it: %s", row)
		}
		if strings.HasPrefix(row, "| 125 |") && !strings.Contains(row, "runs unguarded") {
			t.Errorf("the 125 row must say a bad manifest makes the tool run unguarded, not 125: %s", row)
		}
	}

	for _, want := range []string{"guard status", "guard heal", "guard heal --background", "protection is off",
		"exit 0", "exit 1", "| 75 |", "guard heal --wait", "| 124 |", "| 127 |", "| 125 |", "| 2 |"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the skill's body does not mention %q", want)
		}
	}

	// What the skill says of a fresh install is what guard status does.
	m := regexp.MustCompile("On a fresh install `guard status` exits (\\d+)").FindStringSubmatch(flat)
	if m == nil {
		t.Fatal("the skill does not say what guard status exits on a fresh install (\"On a fresh install `guard status` exits N\")")
	}
	if got := freshInstallStatus(t); m[1] != fmt.Sprint(got) {
		t.Errorf("the skill says a fresh install's guard status exits %s; it exits %d", m[1], got)
	}
	// And what a full heal downloads is the default manifest's models.
	def, err := manifest.Parse("default", manifest.DefaultTOML(), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, md := range def.Models {
		total += md.Size
	}
	if want := fmt.Sprintf("downloads %s models (about %.1f GiB)", numberWord(len(def.Models)), float64(total)/(1<<30)); !strings.Contains(flat, want) {
		t.Errorf("the skill does not say %q", want)
	}
}

// freshInstallStatus installs guard in a new HOME with the default
// manifest, shims first in PATH, and returns guard status's exit status.
func freshInstallStatus(t *testing.T) int {
	t.Helper()
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	shims := filepath.Join(home, ".shim")
	w := guard.World{
		Env: []string{"HOME=" + home, "PATH=" + shims + ":/usr/bin:/bin", "GUARD_SHIM_DIR=" + shims,
			"GUARD_STATE_DIR=" + filepath.Join(tmp, "state"), "GUARD_LOG=" + filepath.Join(tmp, "selfheal.log")},
		Stdout: io.Discard, Stderr: io.Discard, Self: "/proc/self/exe",
	}
	if code := runApp(w, []string{"guard", "install", "--no-rc"}); code != 0 {
		t.Fatalf("guard install exited %d", code)
	}
	return runApp(w, []string{"guard", "status", "--events", "0"})
}

func numberWord(n int) string {
	if words := []string{"no", "one", "two", "three", "four", "five", "six"}; n < len(words) {
		return words[n]
	}
	return fmt.Sprint(n)
}

// TestOpenClawInstallSkill checks docs/openclaw/guard-install, the skill
// OpenClaw offers installers for: it requires the guard binary (OpenClaw
// lists a skill's installers only while a required binary is missing), its
// installers are the npm package and go install (a release replaces them
// with its verified downloads: cmd/release), each label names the command
// to run from where that installer puts guard, and its body's table says
// the same for each kind.
func TestOpenClawInstallSkill(t *testing.T) {
	t.Parallel()
	root := repoRoot()
	dir := filepath.Join(root, "docs", "openclaw", "guard-install")
	skillTextOnly(t, dir)
	data, err := os.ReadFile(filepath.Join(dir, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	front, body, err := skillFrontmatter(data)
	if err != nil {
		t.Fatal(err)
	}
	if front["name"] != filepath.Base(dir) {
		t.Errorf("name %q, want the folder's name %q", front["name"], filepath.Base(dir))
	}
	if desc := front["description"]; !strings.HasPrefix(desc, "Use when the guard binary is missing") || len(desc) > 220 {
		t.Errorf("description %q: want when to use it first, within the 220 characters a small prompt keeps", desc)
	}
	oc := skillMetadata(t, front["metadata"]).OpenClaw
	if !slices.Equal(oc.Requires.Bins, []string{"guard"}) {
		t.Errorf("requires.bins %v, want [guard]: OpenClaw offers installers only for a missing required binary", oc.Requires.Bins)
	}
	checkOS(t, oc.OS)
	module := skillGoModule(t, root)
	if module != "github.com/sandbox-guard/guard" {
		t.Errorf("go.mod names module %q; the skill's homepage says github.com/sandbox-guard/guard", module)
	}
	then := map[string]string{"node": "~/.openclaw/tools/node/npm/bin/guard install", "go": "~/.local/bin/guard install"}
	kinds := map[string]bool{}
	for _, in := range oc.Install {
		kinds[in.Kind] = true
		if in.ID == "" || !slices.Equal(in.Bins, []string{"guard"}) || !slices.Equal(in.OS, []string{"linux"}) {
			t.Errorf("install entry %+v: want an id, bins [guard] and os [linux]", in)
		}
		if !strings.HasSuffix(in.Label, "then run "+then[in.Kind]) {
			t.Errorf("install entry %q's label %q does not end with the command to run from where it puts guard (%s)", in.ID, in.Label, then[in.Kind])
		}
		switch in.Kind {
		case "node":
			if in.Package != "@sandbox-guard/guard" {
				t.Errorf("node installer package %q, want the npm launcher @sandbox-guard/guard", in.Package)
			}
		case "go":
			if in.Module != module+"/cmd/guard@latest" {
				t.Errorf("go installer module %q, want %s/cmd/guard@latest", in.Module, module)
			}
		default:
			t.Errorf("install entry %+v: the repository's copy has node and go installers only; a release makes its downloads", in)
		}
	}
	if !kinds["node"] || !kinds["go"] {
		t.Errorf("the skill's installers are %v, want node and go", kinds)
	}
	flat := strings.Join(strings.Fields(body), " ")
	for _, want := range []string{"`~/.openclaw/tools/guard-install/guard install`", "`" + then["node"] + "`", "`" + then["go"] + "`",
		"`tools.exec.pathPrepend`", "/releases/latest/download/install.sh | sh"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the skill's body does not say %s", want)
		}
	}
}

func skillMetadata(t *testing.T, text string) skillMeta {
	t.Helper()
	var meta skillMeta
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&meta); err != nil {
		t.Fatalf("metadata is not the one-line JSON object OpenClaw expects: %v", err)
	}
	return meta
}

func checkOS(t *testing.T, list []string) {
	t.Helper()
	for _, system := range list {
		if system != "linux" && system != "darwin" && system != "win32" {
			t.Errorf("os %q is not one OpenClaw knows", system)
		}
	}
}

// skillFrontmatter reads the block between the first two --- lines as
// OpenClaw's embedded parser does: one "key: value" per line, no nesting.
func skillFrontmatter(data []byte) (map[string]string, string, error) {
	text := string(data)
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return nil, "", errors.New("SKILL.md does not start with a --- frontmatter line")
	}
	block, body, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		return nil, "", errors.New("SKILL.md frontmatter has no closing --- line")
	}
	front := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(block))
	sc.Buffer(nil, 1<<20)
	line := 1
	for sc.Scan() {
		line++
		key, value, ok := strings.Cut(sc.Text(), ": ")
		if !ok || !regexp.MustCompile(`^[a-z][a-z0-9_-]*$`).MatchString(key) || strings.TrimSpace(value) == "" {
			return nil, "", fmt.Errorf("SKILL.md line %d: want a single-line key: value, got %q", line, sc.Text())
		}
		if _, dup := front[key]; dup {
			return nil, "", fmt.Errorf("SKILL.md line %d: %s given twice", line, key)
		}
		front[key] = strings.TrimSpace(value)
	}
	for _, k := range []string{"name", "description", "metadata"} {
		if front[k] == "" {
			return nil, "", fmt.Errorf("SKILL.md frontmatter has no %s", k)
		}
	}
	return front, body, nil
}

// skillTextOnly: ClawHub publishes text files only, nothing executable.
func skillTextOnly(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() || info.Mode()&0o111 != 0 || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
			t.Errorf("%s is not a plain text file", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func skillGoModule(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}
