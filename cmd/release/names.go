package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Arches are the machines a release builds for (.goreleaser.yaml goarch):
// Go's names, as in the archive names; npm calls amd64 x64.
var Arches = []string{"amd64", "arm64"}

// ArchiveName is a release archive's file name: .goreleaser.yaml's
// archives name_template, "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{
// .Arch }}" plus .tar.gz. install.sh finds its archive in checksums.txt by
// the "_linux_ARCH.tar.gz" end of it.
func ArchiveName(version, arch string) string {
	return fmt.Sprintf("guard_%s_linux_%s.tar.gz", version, arch)
}

// ChecksumsName is the release's one checksums file (.goreleaser.yaml
// checksum name_template); its lines are goreleaser's and sha256sum's
// "HEX  NAME".
const ChecksumsName = "checksums.txt"

// ArchiveFiles are what each archive holds, and nothing else.
var ArchiveFiles = []string{"README.md", "guard"}

// ReleaseBase is where the project's releases are downloaded from; a
// version's files are under ReleaseBase/vVERSION/.
const ReleaseBase = "https://github.com/sandbox-guard/guard/releases/download"

// npmArch is npm's name (process.arch) for a Go architecture.
func npmArch(arch string) string {
	if arch == "amd64" {
		return "x64"
	}
	return arch
}

// meta is what goreleaser writes to dist/metadata.json that a release
// needs: the version its names carry and the commit it was built from.
type meta struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

func readMeta(dist string) (meta, error) {
	var m meta
	data, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dist, "metadata.json"), err)
	}
	if m.Version == "" || m.Commit == "" {
		return m, fmt.Errorf("%s names no version or commit", filepath.Join(dist, "metadata.json"))
	}
	return m, nil
}

// readRelease reads what every step after goreleaser starts from: the
// version and commit (metadata.json) and each file's sha256
// (checksums.txt).
func readRelease(dist string) (meta, map[string]string, error) {
	m, err := readMeta(dist)
	if err != nil {
		return m, nil, err
	}
	sums, err := readChecksums(dist)
	return m, sums, err
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64})  ([^/\s]+)$`)

// readChecksums parses checksums.txt: file name to sha256.
func readChecksums(dist string) (map[string]string, error) {
	f, err := os.Open(filepath.Join(dist, ChecksumsName))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := sumLine.FindStringSubmatch(strings.TrimRight(sc.Text(), "\r"))
		if m == nil {
			return nil, fmt.Errorf("%s line %d: want \"SHA256  NAME\", got %q", ChecksumsName, n, sc.Text())
		}
		sums[m[2]] = m[1]
	}
	return sums, sc.Err()
}
