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
