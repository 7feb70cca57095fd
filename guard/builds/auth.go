package builds

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-guard/guard/manifest"
)

// CheckAuth reports whether a tool's credentials are present: the file named
// by the env var a.Env, or any of a.Files ("~" is home). A file counts only
// when it is a regular, non-empty file: an empty token file authenticates
// nothing. found is the file that satisfied the check. A nil or empty Auth
// asks for nothing and is ok.
func CheckAuth(a *manifest.Auth, home string, getenv func(string) string) (ok bool, found string) {
	if a == nil || (len(a.Files) == 0 && a.Env == "") {
		return true, ""
	}
	if a.Env != "" && getenv != nil {
		if p := expandHome(getenv(a.Env), home); p != "" && usableFile(p) {
			return true, p
		}
	}
	for _, f := range a.Files {
		if p := expandHome(f, home); p != "" && usableFile(p) {
			return true, p
		}
	}
	return false, ""
}

func expandHome(p, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		if home == "" {
			return "" // cannot say where it is; do not guess the current folder
		}
		return filepath.Join(home, p[2:])
	}
	return p
}

func usableFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}
