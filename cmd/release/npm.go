package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The npm packages follow esbuild's pattern: a small main package whose
// bin is a node launcher, and one package per platform holding the binary,
// which npm installs only where its os and cpu match. Scoped under
// @sandbox-guard, the GitHub owner's name, so nobody else can publish a
// platform package the launcher would run.
const (
	npmScope = "@sandbox-guard"
	npmMain  = npmScope + "/guard"
)

// npmPlatform is the platform package for a Go architecture.
func npmPlatform(arch string) string { return npmMain + "-linux-" + npmArch(arch) }

//go:embed launcher.js
var launcher []byte

type packageJSON struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Description          string            `json:"description"`
	Homepage             string            `json:"homepage"`
	Repository           map[string]string `json:"repository"`
	OS                   []string          `json:"os"`
	CPU                  []string          `json:"cpu"`
	Bin                  map[string]string `json:"bin,omitempty"`
	Files                []string          `json:"files"`
	OptionalDependencies map[string]string `json:"optionalDependencies,omitempty"`
	PreferUnplugged      bool              `json:"preferUnplugged,omitempty"`
}

// writeNPM writes dist/npm/guard (the launcher package) and
// dist/npm/guard-linux-ARCH for each of arches (its binary from its
// archive, checked against checksums.txt), each a folder for npm pack or
// npm publish.
func writeNPM(dist string, arches []string, out io.Writer) error {
	m, sums, err := readRelease(dist)
	if err != nil {
		return err
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		return err
	}
	base := func(name, desc string) packageJSON {
		return packageJSON{Name: name, Version: m.Version, Description: desc,
			Homepage:   "https://github.com/sandbox-guard/guard",
			Repository: map[string]string{"type": "git", "url": "git+https://github.com/sandbox-guard/guard.git"},
			OS:         []string{"linux"}}
	}
	main := base(npmMain, "guard keeps agent sandbox scripts from hanging: run `guard install` after installing this package")
	main.Bin = map[string]string{"guard": "bin/guard.js"}
	main.Files = []string{"bin/guard.js", "README.md"}
	main.OptionalDependencies = map[string]string{}
	for _, arch := range arches {
		name := ArchiveName(m.Version, arch)
		want, ok := sums[name]
		if !ok {
			return fmt.Errorf("no %s in %s", name, ChecksumsName)
		}
		// The binary comes from the archive checksums.txt vouches for.
		if got, err := fileSHA256(filepath.Join(dist, name)); err != nil || got != want {
			return fmt.Errorf("%s: sha256 %s (%v), %s says %s", name, got, err, ChecksumsName, want)
		}
		files, err := readArchive(filepath.Join(dist, name))
		if err != nil {
			return err
		}
		g, ok := files["guard"]
		if !ok {
			return fmt.Errorf("%s holds no guard", name)
		}
		p := base(npmPlatform(arch), "the guard binary for linux "+npmArch(arch)+" (installed by "+npmMain+")")
		p.CPU = []string{npmArch(arch)}
		p.Files = []string{"bin/guard"}
		p.PreferUnplugged = true
		dir := filepath.Join(dist, "npm", "guard-linux-"+npmArch(arch))
		if err := writePackage(dir, p, map[string][]byte{"bin/guard": g.data}, "bin/guard"); err != nil {
			return err
		}
		main.CPU = append(main.CPU, npmArch(arch))
		main.OptionalDependencies[p.Name] = m.Version
		fmt.Fprintf(out, "release: wrote %s (%s %s)\n", dir, p.Name, m.Version)
	}
	dir := filepath.Join(dist, "npm", "guard")
	if err := writePackage(dir, main, map[string][]byte{"bin/guard.js": launcher, "README.md": readme}, "bin/guard.js"); err != nil {
		return err
	}
	fmt.Fprintf(out, "release: wrote %s (%s %s)\n", dir, main.Name, m.Version)
	return nil
}

// writePackage writes one package folder anew: package.json and files,
// exe executable.
func writePackage(dir string, p packageJSON, files map[string][]byte, exe string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	files["package.json"] = append(data, '\n')
	for name, data := range files {
		mode := os.FileMode(0o644)
		if name == exe {
			mode = 0o755
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
	}
	return nil
}
