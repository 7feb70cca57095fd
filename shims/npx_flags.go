package shims

// The tables below are npm 11.19's, read from bin/npx-cli.js and
// @npmcli/config's definitions (node 20, Debian 12). They are switch
// statements, not maps, so that a shim call pays nothing at start-up.

// npxSwitch reports whether npx treats key as a flag that never takes the
// next word: npm's Boolean settings plus npx's own list.
func npxSwitch(key string) bool {
	switch key {
	case "all", "allow-same-version", "allow-scripts-pending", "allow-scripts-pin",
		"always-spawn", "audit", "bin-links", "browser", "bypass-2fa", "color", "commit-hooks",
		"dangerously-allow-all-scripts", "description", "dev", "diff-ignore-all-space",
		"diff-name-only", "diff-no-prefix", "diff-text", "dry-run", "engine-strict",
		"expect-results", "force", "foreground-scripts", "format-package-lock", "fund",
		"git-tag-version", "global", "global-style", "h", "help", "if-present",
		"ignore-existing", "ignore-scripts", "include-attestations", "include-staged",
		"include-workspace-root", "init-private", "install-links", "json", "legacy-bundling",
		"legacy-peer-deps", "link", "long", "no-install", "offline",
		"omit-lockfile-registry-resolved", "optional", "package-lock", "package-lock-only",
		"packages-all", "parseable", "prefer-dedupe", "prefer-offline", "prefer-online",
		"production", "progress", "provenance", "q", "quiet", "read-only", "rebuild-bundle",
		"save", "save-bundle", "save-dev", "save-exact", "save-optional", "save-peer",
		"save-prod", "shell-auto-fallback", "shrinkwrap", "sign-git-commit", "sign-git-tag",
		"strict-allow-scripts", "strict-peer-deps", "strict-ssl", "timing", "unicode",
		"update-notifier", "usage", "v", "version", "versions", "workspaces",
		"workspaces-update", "yes":
		return true
	}
	return false
}

// npxTakesValue reports whether npx always takes the next word as key's
// value, even when that word starts with "-".
func npxTakesValue(key string) bool {
	switch key {
	case "package", "p", "cache", "userconfig", "call", "c", "shell", "npm", "node-arg", "n":
		return true
	}
	return false
}

// npxRemoved reports the flags npx cuts out with "has been removed".
func npxRemoved(key string) bool {
	switch key {
	case "always-spawn", "ignore-existing", "shell-auto-fallback", "npm", "node-arg", "n":
		return true
	}
	return false
}

// npxShorthand returns what npm expands a shorthand to. "p" is missing on
// purpose: npx reads -p as --package before it looks at shorthands.
func npxShorthand(key string) ([]string, bool) {
	switch key {
	case "?", "H", "h", "help":
		return []string{"--usage"}, true
	case "B":
		return []string{"--save-bundle"}, true
	case "C":
		return []string{"--prefix"}, true
	case "D":
		return []string{"--save-dev"}, true
	case "E":
		return []string{"--save-exact"}, true
	case "L":
		return []string{"--location"}, true
	case "O":
		return []string{"--save-optional"}, true
	case "P":
		return []string{"--save-prod"}, true
	case "S":
		return []string{"--save"}, true
	case "a":
		return []string{"--all"}, true
	case "c":
		return []string{"--call"}, true
	case "d":
		return []string{"--loglevel", "info"}, true
	case "dd", "verbose":
		return []string{"--loglevel", "verbose"}, true
	case "ddd":
		return []string{"--loglevel", "silly"}, true
	case "desc":
		return []string{"--description"}, true
	case "enjoy-by":
		return []string{"--before"}, true
	case "f":
		return []string{"--force"}, true
	case "g":
		return []string{"--global"}, true
	case "iwr":
		return []string{"--include-workspace-root"}, true
	case "l":
		return []string{"--long"}, true
	case "local":
		return []string{"--no-global"}, true
	case "m":
		return []string{"--message"}, true
	case "n", "no":
		return []string{"--no-yes"}, true
	case "porcelain":
		return []string{"--parseable"}, true
	case "q", "quiet":
		return []string{"--loglevel", "warn"}, true
	case "readonly":
		return []string{"--read-only"}, true
	case "reg":
		return []string{"--registry"}, true
	case "s", "silent":
		return []string{"--loglevel", "silent"}, true
	case "v":
		return []string{"--version"}, true
	case "w":
		return []string{"--workspace"}, true
	case "ws":
		return []string{"--workspaces"}, true
	case "y":
		return []string{"--yes"}, true
	}
	return nil, false
}
