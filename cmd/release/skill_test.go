package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkill: the skill a release ships is the repository's copy with a
// download per machine carrying the archive's real sha256 and URL, and
// the npm and go installers pinned to the release; the rest of the file
// is unchanged.
func TestSkill(t *testing.T) {
	dist := makeDist(t)
	t.Chdir(repoRoot(t))
	const skill = "docs/openclaw/guard/SKILL.md"
	var out strings.Builder
	if err := writeSkill(dist, skill, &out); err != nil {
		t.Fatalf("writeSkill: %v\n%s", err, out.String())
	}
	repo, err := os.ReadFile(skill)
	if err != nil {
		t.Fatal(err)
	}
	made, err := os.ReadFile(filepath.Join(dist, "openclaw", "guard", "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	sums, err := readChecksums(dist)
	if err != nil {
		t.Fatal(err)
	}
	repoLines, madeLines := strings.Split(string(repo), "\n"), strings.Split(string(made), "\n")
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
	got := map[string]skillInstall{}
	for _, in := range meta.OpenClaw.Install {
		got[in.ID] = in
	}
	for _, arch := range Arches {
		name := ArchiveName(testVersion, arch)
		in := got["download-linux-"+npmArch(arch)]
		if in.Kind != "download" || in.URL != ReleaseBase+"/v"+testVersion+"/"+name || in.Archive != "tar.gz" || !in.Extract ||
			in.SHA256 != sums[name] || len(in.SHA256) != 64 || strings.Join(in.Bins, ",") != "guard" {
			t.Errorf("download for %s: %+v, want %s with sha256 %s", arch, in, name, sums[name])
		}
	}
	if in := got["node"]; in.Kind != "node" || in.Package != npmMain+"@"+testVersion {
		t.Errorf("node installer: %+v", in)
	}
	if in := got["go"]; in.Kind != "go" || in.Module != "github.com/sandbox-guard/guard/cmd/guard@v"+testVersion {
		t.Errorf("go installer: %+v", in)
	}
	if len(got) != len(Arches)+2 {
		t.Errorf("installers %v, want a download per arch, node and go", meta.OpenClaw.Install)
	}
}
