package resolve

import "path/filepath"

// LookPath returns the first regular executable file named name in the
// folders of pathEnv (a $PATH value), for the commands guard runs itself
// (a build's steps, apt-get, sudo, git) and the ones it reports on. Unlike
// Real it knows nothing of shims, and it skips empty and relative entries:
// guard never runs something from the current folder by accident.
func LookPath(name, pathEnv string) (string, bool) {
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, name); isExec(p) {
			return p, true
		}
	}
	return "", false
}
