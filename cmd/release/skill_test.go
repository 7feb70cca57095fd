package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkill: a release ships the guard skill as the repository has it, and
// guard-install with a verified download per machine in place of the
// repository's npm and go entries (OpenClaw lists every installer only
// when all are downloads): each with the archive's real sha256 and URL,
// the machine in its label and the command to run from where OpenClaw
// puts guard; the rest of the file is unchanged.
func TestSkill(t *testing.T) {
	dist := makeDist(t)
	t.Chdir(repoRoot(t))
	var out strings.Builder
	if err := writeSkill(dist, "docs/openclaw", &out); err != nil {
		t.Fatalf("writeSkill: %v\n%s", err, out.String())
	}
	for _, name := range []string{skillGuard, skillInstaller} {
		repo, err := os.ReadFile(filepath.Join("docs", "openclaw", name, "SKILL.md"))
		if err != nil {
			t.Fatal(err)
		}
		made, err := os.ReadFile(filepath.Join(dist, "openclaw", name, "SKILL.md"))
		if err != nil {
			t.Fatal(err)
		}
		if name == skillGuard && string(made) != string(repo) {
			t.Errorf("the release's guard skill differs from the repository's")
		}
		if name == skillInstaller {
			checkInstaller(t, dist, string(repo), string(made))
		}
	}
}

func checkInstaller(t *testing.T, dist, repo, made string) {
	sums, err := readChecksums(dist)
	if err != nil {
		t.Fatal(err)
	}
	repoLines, madeLines := strings.Split(repo, "\n"), strings.Split(made, "\n")
	if len(repoLines) != len(madeLines) {
		t.Fatalf("the release's skill has %d lines, the repository's %d", len(madeLines), len(repoLines))
	}
	var meta skillMeta
	for i, l := range madeLines {
		if !strings.HasPrefix(l, metadataKey) {
			if l != repoLines[i] {
				t.Errorf("line %d changed: %q, was %q", i+1, l, repoLines[i])
			}
			continue
		}
		dec := json.NewDecoder(strings.NewReader(strings.TrimPrefix(l, metadataKey)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&meta); err != nil {
			t.Fatalf("the release's metadata: %v", err)
		}
	}
	if meta.OpenClaw.Requires == nil || strings.Join(meta.OpenClaw.Requires.Bins, ",") != "guard" {
		t.Errorf("requires %+v, want bins [guard]", meta.OpenClaw.Requires)
	}
	if len(meta.OpenClaw.Install) != len(Arches) {
		t.Errorf("installers %v, want one download per machine and nothing else", meta.OpenClaw.Install)
	}
	for i, arch := range Arches {
		name := ArchiveName(testVersion, arch)
		if i >= len(meta.OpenClaw.Install) {
			break
		}
		in := meta.OpenClaw.Install[i]
		if in.ID != "download-linux-"+npmArch(arch) || in.Kind != "download" || in.URL != ReleaseBase+"/v"+testVersion+"/"+name ||
			in.Archive != "tar.gz" || !in.Extract || in.SHA256 != sums[name] || len(in.SHA256) != 64 || strings.Join(in.Bins, ",") != "guard" {
			t.Errorf("download for %s: %+v, want %s with sha256 %s", arch, in, name, sums[name])
		}
		if !strings.Contains(in.Label, "Linux "+npmArch(arch)+" ("+unameArch(arch)+",") ||
			!strings.HasSuffix(in.Label, "then run ~/.openclaw/tools/guard-install/guard install") {
			t.Errorf("download label %q: want the machine (as npm and uname -m name it) and the command to run after", in.Label)
		}
	}
}

// TestSkillRefusesDownloadsInTheRepository: a download entry in the
// repository's copy would ship a made-up checksum; one without
// requires.bins guard would never be offered.
func TestSkillRefusesDownloadsInTheRepository(t *testing.T) {
	dist := makeDist(t)
	for _, c := range []struct{ meta, why string }{
		{`{"openclaw":{"requires":{"bins":["guard"]},"install":[{"id":"d","kind":"download","label":"x","bins":["guard"],"url":"https://x/y.tgz"}]}}`, "only node and go entries"},
		{`{"openclaw":{"install":[{"id":"n","kind":"node","label":"x","bins":["guard"],"package":"p"}]}}`, "requires.bins must be [guard]"},
	} {
		docs := t.TempDir()
		for _, name := range []string{skillGuard, skillInstaller} {
			if err := os.MkdirAll(filepath.Join(docs, name), 0o755); err != nil {
				t.Fatal(err)
			}
			text := "---\nname: " + name + "\nmetadata: " + c.meta + "\n---\n"
			if err := os.WriteFile(filepath.Join(docs, name, "SKILL.md"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := writeSkill(dist, docs, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("writeSkill with %s: %v, want it refused (%s)", c.meta, err, c.why)
		}
	}
}
