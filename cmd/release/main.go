// Command release turns goreleaser's dist/ into what a release ships
// besides the archives, and checks what goreleaser made (docs/install.md):
//
//	go run ./cmd/release check dist   the archives, checksums and binaries are what install.sh expects
//	go run ./cmd/release npm dist     dist/npm: the npm packages (a launcher and one per platform)
//	go run ./cmd/release skill dist   dist/openclaw: the guard skill, and guard-install with the verified downloads
//
// It runs from the repository's top folder (it reads README.md and the
// skill there). The archive naming it checks and builds by is ArchiveName,
// the one place .goreleaser.yaml's name_template is mirrored.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run ./cmd/release check|npm|skill DIST")
		os.Exit(2)
	}
	dist := os.Args[2]
	var err error
	switch os.Args[1] {
	case "check":
		err = check(dist, Arches, os.Stdout)
	case "npm":
		err = writeNPM(dist, Arches, os.Stdout)
	case "skill":
		err = writeSkill(dist, "docs/openclaw", os.Stdout)
	default:
		fmt.Fprintf(os.Stderr, "release: unknown command %q; want check, npm or skill\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}
