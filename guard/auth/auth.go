// Package auth tells whether a tool's credentials are present. It is its
// own package because a missing credential is reported (guard status, guard
// heal, an auth.missing event) but never healed and never blocks a call:
// it shares nothing with the binary and model heals.
package auth

import (
	"os"

	"github.com/sandbox-guard/guard/manifest"
)

// Check reports whether a tool's credentials are present: the file named
// by the env var a.Env, or any of a.Files ("~" is home). A file counts only
// when it is a regular, non-empty file: an empty token file authenticates
// nothing. found is the file that satisfied the check. A nil or empty Auth
// asks for nothing and is ok.
func Check(a *manifest.Auth, home string, getenv func(string) string) (ok bool, found string) {
	if a == nil || (len(a.Files) == 0 && a.Env == "") {
		return true, ""
	}
	if a.Env != "" && getenv != nil {
		if p := manifest.ExpandHome(getenv(a.Env), home); p != "" && usableFile(p) {
			return true, p
		}
	}
	for _, f := range a.Files {
		if p := manifest.ExpandHome(f, home); p != "" && usableFile(p) {
			return true, p
		}
	}
	return false, ""
}

func usableFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}
