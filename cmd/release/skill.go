package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// skillMeta is the SKILL.md frontmatter's metadata.openclaw, the fields
// OpenClaw's skill format defines (its SkillInstallSpec, plus sha256 on a
// download). Decoding is strict: OpenClaw ignores a key it does not know,
// so a typo would drop an installer without a word.
type skillMeta struct {
	OpenClaw struct {
		Emoji    string         `json:"emoji,omitempty"`
		OS       []string       `json:"os,omitempty"`
		Requires *skillRequires `json:"requires,omitempty"`
		Install  []skillInstall `json:"install,omitempty"`
	} `json:"openclaw"`
}

type skillRequires struct {
	Bins []string `json:"bins,omitempty"`
}

type skillInstall struct {
	ID      string   `json:"id"`
	Kind    string   `json:"kind"`
	Label   string   `json:"label"`
	OS      []string `json:"os,omitempty"`
	Bins    []string `json:"bins"`
	Package string   `json:"package,omitempty"` // node
	Module  string   `json:"module,omitempty"`  // go
	URL     string   `json:"url,omitempty"`     // download
	Archive string   `json:"archive,omitempty"` // download
	Extract bool     `json:"extract,omitempty"` // download
	SHA256  string   `json:"sha256,omitempty"`  // download
}

const metadataKey = "metadata: "

// The skills a release ships (docs/openclaw): guard, the one an agent
// reads, copied as it is; and guard-install, which requires the guard
// binary so that OpenClaw offers its installers while guard is missing.
const (
	skillGuard     = "guard"
	skillInstaller = "guard-install"
)

// downloadThen is where OpenClaw's download installer puts guard (its
// tools folder for the skill, ~/.openclaw/tools/SKILL) and the command to
// run from there.
const downloadThen = "then run ~/.openclaw/tools/" + skillInstaller + "/guard install"

// writeSkill writes dist/openclaw: guard's skill as the repository has it,
// and guard-install with its installers replaced by a verified download
// per machine, carrying the archive's sha256 from checksums.txt and the
// machine in its label. Only downloads: OpenClaw offers one installer of
// a mixed list, in its own order (node before go before download), and
// lists every entry only when all are downloads, so the verified ones
// would never be offered beside the npm and go entries of the
// repository's copy.
func writeSkill(dist, docs string, out io.Writer) error {
	m, sums, err := readRelease(dist)
	if err != nil {
		return err
	}
	guardSkill, err := os.ReadFile(filepath.Join(docs, skillGuard, "SKILL.md"))
	if err != nil {
		return err
	}
	if err := writeSkillFile(dist, skillGuard, guardSkill); err != nil {
		return err
	}
	fmt.Fprintf(out, "release: wrote %s\n", filepath.Join(dist, "openclaw", skillGuard, "SKILL.md"))
	skill := filepath.Join(docs, skillInstaller, "SKILL.md")
	data, err := os.ReadFile(skill)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, metadataKey) {
			at = i
			break
		}
	}
	if at < 0 {
		return fmt.Errorf("%s has no %q line", skill, metadataKey)
	}
	var meta skillMeta
	dec := json.NewDecoder(strings.NewReader(strings.TrimPrefix(lines[at], metadataKey)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&meta); err != nil {
		return fmt.Errorf("%s: metadata: %w", skill, err)
	}
	if meta.OpenClaw.Requires == nil || strings.Join(meta.OpenClaw.Requires.Bins, ",") != "guard" {
		return fmt.Errorf("%s: metadata: requires.bins must be [guard], or OpenClaw never offers its installers", skill)
	}
	for _, in := range meta.OpenClaw.Install {
		if in.Kind != "node" && in.Kind != "go" {
			return fmt.Errorf("%s: install entry %q: the repository's copy has only node and go entries; the downloads are made here", skill, in.ID)
		}
	}
	var install []skillInstall
	for _, arch := range Arches {
		name := ArchiveName(m.Version, arch)
		sum, ok := sums[name]
		if !ok {
			return fmt.Errorf("no %s in %s", name, ChecksumsName)
		}
		install = append(install, skillInstall{
			ID: "download-linux-" + npmArch(arch), Kind: "download",
			Label: "Download guard " + m.Version + " for Linux " + npmArch(arch) + " (" + unameArch(arch) + ", sha256-verified), " + downloadThen,
			OS:    []string{"linux"}, Bins: []string{"guard"},
			URL: ReleaseBase + "/v" + m.Version + "/" + name, Archive: "tar.gz", Extract: true, SHA256: sum,
		})
	}
	meta.OpenClaw.Install = install
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(meta); err != nil {
		return err
	}
	lines[at] = metadataKey + strings.TrimSpace(buf.String())
	if err := writeSkillFile(dist, skillInstaller, []byte(strings.Join(lines, "\n"))); err != nil {
		return err
	}
	fmt.Fprintf(out, "release: wrote %s (%d verified downloads, guard %s)\n", filepath.Join(dist, "openclaw", skillInstaller, "SKILL.md"), len(install), m.Version)
	return nil
}

// writeSkillFile writes dist/openclaw/NAME/SKILL.md.
func writeSkillFile(dist, name string, data []byte) error {
	path := filepath.Join(dist, "openclaw", name, "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// unameArch is what `uname -m` says on a machine of arch (a Go GOARCH),
// for the label an agent matches against it.
func unameArch(arch string) string {
	switch arch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return arch
}
