package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets the test binary be guard: a test links it as guard (or
// runs `guard install`, which copies it into the shim folder and links tool
// names to the copy), so a link named npx really dispatches on argv[0] here
// too. The testscripts run in package scripttest, against a guard built
// from this package.
func TestMain(m *testing.M) {
	if !strings.HasSuffix(filepath.Base(os.Args[0]), ".test") {
		os.Exit(run(os.Args))
	}
	// No Go test of this package reaches GitHub's API: a prebuilt asks a
	// loopback port nothing listens on.
	if os.Getenv("GITHUB_API_URL") == "" {
		os.Setenv("GITHUB_API_URL", "http://127.0.0.1:1")
	}
	os.Exit(m.Run())
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}
