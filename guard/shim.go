package guard

import "context"

// Shim runs one call of the shim name with args (argv without argv[0]) in
// the world w and returns its exit status (the README's "Exit status of a
// shim call"): load the configuration, mend evicted shims, call.
func Shim(w World, name string, args []string) int {
	c, err := LoadConfig(w)
	if err != nil {
		Tell(w.Stderr, name+": "+err.Error())
		return ExitStatus(err)
	}
	e := New(c)
	defer e.Close()
	e.Repair()
	return e.call(context.Background(), name, args)
}
