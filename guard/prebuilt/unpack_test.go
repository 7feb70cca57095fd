package prebuilt

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An archive that would write outside its folder, through a link it made,
// or a device, is refused whole; nothing lands outside the folder.
func TestUnpackRefusesWhatLeavesTheFolder(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{"absolute path", []entry{{name: "/tmp/evil", body: "x"}}, "not relative"},
		{"dot dot", []entry{{name: "bin/../../evil", body: "x"}}, "leaves the folder"},
		{"absolute link", []entry{{name: "bin", link: "/etc", typ: tar.TypeSymlink}}, "not relative"},
		{"link out", []entry{{name: "bin/up", link: "../../..", typ: tar.TypeSymlink}}, "leaves the folder"},
		{"through a link", []entry{{name: "d", link: ".", typ: tar.TypeSymlink}, {name: "d/x", body: "x"}}, "below the link"},
		{"hard link out", []entry{{name: "h", link: "../outside", typ: tar.TypeLink}}, "refused the hard link"},
		{"device", []entry{{name: "null", typ: tar.TypeChar}}, "not a file, folder or link"},
		{"fifo", []entry{{name: "fifo", typ: tar.TypeFifo}}, "not a file, folder or link"},
		{"file over a file", []entry{{name: "a", body: "x"}, {name: "a", body: "y"}}, "file exists"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			outside := filepath.Join(root, "outside")
			os.WriteFile(outside, []byte("keep"), 0o644)
			archive := filepath.Join(root, "a.tar.gz")
			os.WriteFile(archive, tarGz(t, c.entries), 0o644)
			err := unpack(archive, filepath.Join(root, "dest"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("unpack: %v, want %q", err, c.want)
			}
			if data, _ := os.ReadFile(outside); string(data) != "keep" {
				t.Errorf("a file outside the folder changed: %q", data)
			}
			if _, err := os.Lstat(filepath.Join(root, "evil")); err == nil {
				t.Error("a file was written outside the folder")
			}
		})
	}
}

// What a release holds comes out as it is: folders, executables, links to
// files beside them, hard links.
func TestUnpackRelease(t *testing.T) {
	root := t.TempDir()
	archive := filepath.Join(root, "a.tar.gz")
	os.WriteFile(archive, tarGz(t, []entry{
		{name: "./", typ: tar.TypeDir, mode: 0o755},
		{name: "llama-b1/llama-simple", body: "#!/bin/sh\n", mode: 0o755},
		{name: "llama-b1/libllama.so.0", body: "lib"},
		{name: "llama-b1/libllama.so", link: "libllama.so.0", typ: tar.TypeSymlink},
		{name: "llama-b1/copy", link: "llama-b1/libllama.so.0", typ: tar.TypeLink},
	}), 0o644)
	dest := filepath.Join(root, "dest")
	if err := unpack(archive, dest); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dest, "llama-b1", "libllama.so")); err != nil || string(data) != "lib" {
		t.Errorf("through the link: %q, %v", data, err)
	}
	if !isExecutable(filepath.Join(dest, "llama-b1", "llama-simple")) {
		t.Error("the tool lost its execute bit")
	}
	tools, err := findTools(dest, []string{"llama-simple"})
	if err != nil || tools["llama-simple"] != filepath.Join(dest, "llama-b1", "llama-simple") {
		t.Errorf("findTools = %v, %v", tools, err)
	}
	// A release that makes some of the recipe's tools (llama.cpp's has no
	// examples, llama-simple among them) serves those it makes.
	tools, err = findTools(dest, []string{"llama-completion", "llama-simple"})
	if _, has := tools["llama-completion"]; err != nil || has || tools["llama-simple"] == "" {
		t.Errorf("an archive with one of two tools: findTools = %v, %v", tools, err)
	}
	if _, err := findTools(dest, []string{"llama-completion", "llama-cli"}); err == nil || !strings.Contains(err.Error(), "has no llama-completion nor llama-cli") {
		t.Errorf("an archive with none of the tools: %v", err)
	}
}
