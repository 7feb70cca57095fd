package shims

// HasStrayWord reports whether llama-completion arguments hold a word that
// belongs to no flag (where WithModel stops, since llama-simple's prompt
// starts there).
func HasStrayWord(args []string) bool {
	flags, _ := scanLlama(args)
	for _, a := range flags {
		if a.name == "" {
			return true
		}
	}
	return false
}

// NonInteractive is nonInteractive without the flags it took out.
func NonInteractive(args []string, call LlamaCall, stdinTTY bool) []string {
	out, _ := nonInteractive(args, call, stdinTTY)
	return out
}
