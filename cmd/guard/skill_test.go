package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// skillMeta is metadata.openclaw as the OpenClaw skill format defines it.
// Decoding is strict because OpenClaw silently ignores a key it does not
// know: a typo would drop the installer without a word.
type skillMeta struct {
	OpenClaw struct {
		Emoji    string   `json:"emoji"`
		OS       []string `json:"os"`
		Requires struct {
			Bins []string `json:"bins"`
		} `json:"requires"`
		Install []struct {
			ID     string   `json:"id"`
			Kind   string   `json:"kind"`
			Module string   `json:"module"`
			Bins   []string `json:"bins"`
			Label  string   `json:"label"`
		} `json:"install"`
	} `json:"openclaw"`
}

// TestOpenClawSkill checks docs/openclaw/guard: a text-only folder whose
// SKILL.md frontmatter parses the way OpenClaw reads it (single-line keys,
// metadata a one-line JSON object), requires the guard binary, installs it
// with a go installer naming this module's cmd/guard, and whose body
// teaches guard install, guard status and the exit statuses.
func TestOpenClawSkill(t *testing.T) {
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
	for _, word := range []string{"npx", "llama-completion", "evict"} {
		if !strings.Contains(desc, word) {
			t.Errorf("description does not say %q, so an agent would not know when to use the skill", word)
		}
	}

	var meta skillMeta
	dec := json.NewDecoder(strings.NewReader(front["metadata"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&meta); err != nil {
		t.Fatalf("metadata is not the one-line JSON object OpenClaw expects: %v", err)
	}
	oc := meta.OpenClaw
	if strings.Join(oc.Requires.Bins, ",") != "guard" {
		t.Errorf("requires.bins = %q, want [guard]", oc.Requires.Bins)
	}
	for _, system := range oc.OS {
		if system != "linux" && system != "darwin" && system != "win32" {
			t.Errorf("os %q is not one OpenClaw knows", system)
		}
	}

	module := skillGoModule(t, root)
	if module != "github.com/sandbox-guard/guard" {
		t.Errorf("go.mod names module %q; the skill and the README say github.com/sandbox-guard/guard", module)
	}
	wantPkg := module + "/cmd/guard"
	found := false
	for _, in := range oc.Install {
		if in.Kind != "go" {
			continue
		}
		found = true
		pkg, version, _ := strings.Cut(in.Module, "@")
		if pkg != wantPkg || version == "" {
			t.Errorf("go installer module %q, want %s@VERSION", in.Module, wantPkg)
		}
		if strings.Join(in.Bins, ",") != "guard" {
			t.Errorf("go installer bins %q, want [guard]", in.Bins)
		}
		if in.ID == "" || in.Label == "" {
			t.Errorf("go installer needs an id and a label: %+v", in)
		}
	}
	if !found {
		t.Error("no install entry of kind go")
	}
	// The installer's package must be this repository's main package.
	rel := strings.TrimPrefix(wantPkg, module+"/")
	if src, err := os.ReadFile(filepath.Join(root, rel, "main.go")); err != nil || !bytes.Contains(src, []byte("\npackage main\n")) {
		t.Errorf("%s is not a main package in this repository (%v)", rel, err)
	}

	for _, want := range []string{"guard install", "guard status", "guard heal", "exit 0", "exit 1", "| 124 |", "| 127 |", "| 125 |", "| 2 |"} {
		if !strings.Contains(body, want) {
			t.Errorf("the skill's body does not mention %q", want)
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
