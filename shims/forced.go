package shims

// Npx is the shim name with npx's policy.
const Npx = "npx"

// Forced returns a call's arguments with what the tool's policy forces, the
// one rule shared by every way guard runs a tool: a supervised or exec'd
// call, a fallback attempt, and a call run unguarded because guard itself
// cannot work. npx gets its forced flags at the front (NpxArgs);
// llama-completion gets -no-cnv unless a person asked for conversation at a
// terminal (nonInteractive: without it the tool waits on stdin for good;
// a planned call adds its defaults besides); any other tool the manifest's
// forced flags (ForceArgs). args itself is never changed.
func Forced(name string, args, forced []string, stdinTTY bool) []string {
	switch name {
	case Npx:
		return NpxArgs(args, forced)
	case LlamaCompletion:
		call, err := ParseCompletion(args)
		if err != nil {
			return append([]string(nil), args...) // the tool's own parser says it better
		}
		out, _ := nonInteractive(ForceArgs(args, forced), call, stdinTTY)
		return out
	}
	if len(forced) == 0 {
		return args // the healthy exec path: nothing to copy
	}
	return ForceArgs(args, forced)
}
