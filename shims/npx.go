package shims

import "strings"

// DefaultNpxForced is what NpxArgs forces when the manifest names nothing:
// --yes stops npx from asking "Ok to proceed? (y)" on a terminal and from
// failing at once under an .npmrc with yes=false.
var DefaultNpxForced = []string{"--yes"}

// NpxArgs returns args (argv without argv[0]) with the forced flags inserted
// at the front, that is right after `npx`. Flags after the package name
// belong to the package (`npx cowsay --yes hi` still prompts), so the front is
// the only place npx reads them.
//
// A forced flag is left out when the caller already set the same setting
// among npx's own options: -y, --yes and --yes=true count as --yes; so do
// --no, --no-yes, --yes=false and --no-install, because the caller's explicit
// answer is respected and the last of --yes/--no wins anyway. Where npx's own
// options end follows npm 11's bin/npx-cli.js: "--" ends them, the first
// positional word is the package, -p/--package, -c/--call, --cache,
// --userconfig and --shell always take the next word, and any other flag
// without "=" takes the next word unless it is a known switch or the next
// word starts with "-".
//
// A forced entry that does not start with "-" is taken as the value of the
// forced flag before it (so ["--loglevel", "error"] stays a pair); a stray one
// is ignored, because inserting it would turn it into the package name. A nil
// forced means DefaultNpxForced. The output always holds every input argument,
// in order.
func NpxArgs(args []string, forced []string) []string {
	if forced == nil {
		forced = DefaultNpxForced
	}
	return insertForced(args, forced, npxOwnKeys(args), npxKey)
}

// ForceArgs is NpxArgs for a tool guard knows nothing about: forced flags go
// to the front unless a flag with the same key (dashes, "=value" and a "no-"
// prefix stripped) appears before the first non-option word or "--". Short
// and long spellings are not matched, since their meaning is the tool's own.
func ForceArgs(args, forced []string) []string {
	keys := map[string]bool{}
	for _, a := range args {
		if a == "--" || !isFlagWord(a) {
			break
		}
		keys[genericKey(a)] = true
	}
	return insertForced(args, forced, keys, genericKey)
}

// insertForced puts the forced groups whose key the caller did not set in
// front of args. It never drops or reorders a caller's argument.
func insertForced(args, forced []string, set map[string]bool, key func(string) string) []string {
	out := make([]string, 0, len(forced)+len(args))
	for i := 0; i < len(forced); i++ {
		f := forced[i]
		if f == "--" || !isFlagWord(f) {
			continue // a bare word would become the package or an operand
		}
		group := forced[i : i+1]
		if !strings.Contains(f, "=") && i+1 < len(forced) && !isFlagWord(forced[i+1]) && forced[i+1] != "--" {
			group = forced[i : i+2]
			i++
		}
		k := key(f)
		if set[k] {
			continue
		}
		set[k] = true // a forced list that repeats itself is inserted once
		out = append(out, group...)
	}
	return append(out, args...)
}

// isFlagWord reports whether a looks like an option ("-" alone is an operand,
// usually stdin).
func isFlagWord(a string) bool {
	return len(a) > 1 && a[0] == '-'
}

// genericKey names the setting a flag controls: "--no-color=x" → "color".
func genericKey(a string) string {
	k := strings.TrimLeft(a, "-")
	k, _, _ = strings.Cut(k, "=")
	if rest, ok := strings.CutPrefix(k, "no-"); ok && rest != "" {
		return rest
	}
	return k
}

// npxOwnKeys returns the settings the caller gave npx itself, walking the
// arguments the way npm 11's bin/npx-cli.js does before it inserts "--" in
// front of the package name.
func npxOwnKeys(args []string) map[string]bool {
	keys := map[string]bool{}
	toks := args
	copied := false
	// Shorthand expansion only ever produces long flags, so the walk ends;
	// the bound is a second guard against a table edit that breaks that.
	for i, steps := 0, 0; i < len(toks) && steps < 4*len(args)+16; i, steps = i+1, steps+1 {
		arg := toks[i]
		if arg == "--" || !strings.HasPrefix(arg, "-") {
			break // options end; a positional word is the package
		}
		key, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if exp, ok := npxShorthand(key); ok && !npxRemoved(key) {
			if hasValue {
				exp = append(exp, value)
			}
			if !copied {
				toks = append([]string(nil), toks...)
				copied = true
			}
			toks = append(toks[:i], append(exp, toks[i+1:]...)...)
			i--
			continue
		}
		if !npxRemoved(key) {
			keys[npxCanon(key)] = true
		}
		next := i+1 < len(toks) && strings.HasPrefix(toks[i+1], "-")
		if !hasValue && !npxSwitch(key) && (npxTakesValue(key) || !next) {
			i++ // the next word is this flag's value
		}
	}
	return keys
}

// npxKey names the setting a forced flag controls, resolving npm's
// shorthands so that -y and --no both mean the "yes" setting.
func npxKey(flag string) string {
	key, _, _ := strings.Cut(strings.TrimLeft(flag, "-"), "=")
	if exp, ok := npxShorthand(key); ok {
		key, _, _ = strings.Cut(strings.TrimLeft(exp[0], "-"), "=")
	}
	return npxCanon(key)
}

// npxCanon folds the spellings of one setting together: --no-X and --X=false
// set X, and --no-install is npx's old name for --yes=false.
func npxCanon(key string) string {
	switch key {
	case "p":
		return "package"
	case "shell":
		return "script-shell"
	case "no-install":
		return "yes"
	}
	if rest, ok := strings.CutPrefix(key, "no-"); ok && rest != "" {
		return rest
	}
	return key
}
