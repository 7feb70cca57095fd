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
		Emoji   string         `json:"emoji,omitempty"`
		OS      []string       `json:"os,omitempty"`
		Install []skillInstall `json:"install"`
	} `json:"openclaw"`
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

// writeSkill writes dist/openclaw/guard/SKILL.md: the repository's copy
// with its installers pinned to this release (the node package at this
// version, go install at vVERSION) and, first, a verified download per
// machine carrying the archive's sha256 from checksums.txt.
func writeSkill(dist, skill string, out io.Writer) error {
	m, sums, err := readRelease(dist)
	if err != nil {
		return err
	}
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
	var install []skillInstall
	for _, arch := range Arches {
		name := ArchiveName(m.Version, arch)
		sum, ok := sums[name]
		if !ok {
			return fmt.Errorf("no %s in %s", name, ChecksumsName)
		}
		install = append(install, skillInstall{
			ID: "download-linux-" + npmArch(arch), Kind: "download",
			Label: "Download guard " + m.Version + " for Linux " + npmArch(arch) + " (sha256-verified), then run guard install",
			OS:    []string{"linux"}, Bins: []string{"guard"},
			URL: ReleaseBase + "/v" + m.Version + "/" + name, Archive: "tar.gz", Extract: true, SHA256: sum,
		})
	}
	for _, in := range meta.OpenClaw.Install {
		switch in.Kind {
		case "node":
			in.Package = npmMain + "@" + m.Version
		case "go":
			in.Module = strings.SplitN(in.Module, "@", 2)[0] + "@v" + m.Version
		default:
			return fmt.Errorf("%s: install entry %q: the repository's copy has only node and go entries; the downloads are made here", skill, in.ID)
		}
		install = append(install, in)
	}
	meta.OpenClaw.Install = install
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(meta); err != nil {
		return err
	}
	lines[at] = metadataKey + strings.TrimSpace(buf.String())
	path := filepath.Join(dist, "openclaw", "guard", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "release: wrote %s (%d installers, guard %s)\n", path, len(install), m.Version)
	return nil
}
