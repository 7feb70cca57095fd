package commands

import "github.com/sandbox-guard/guard/guard"

// ExitError is a command's decision to end with exit status Code, saying
// Msg on stderr ("" says nothing: the reason was printed already, or is in
// a record). It satisfies urfave/cli's ExitCoder, so cmd/guard passes it
// through as it is.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode is the status the command ends with.
func (e *ExitError) ExitCode() int { return e.Code }

// exit is ExitError as an error: nil for status 0.
func exit(code int, msg string) error {
	if code == 0 {
		return nil
	}
	return &ExitError{Code: code, Msg: msg}
}

// HealJobExit is how `guard heal --job` ends once the engine's RunJob
// returned ok and err: an error guard met is exit 1 with its message, a
// heal that failed exit 1 silently (the failure is in the job's record,
// where the call that waits on it reads it), a heal that worked exit 0.
func HealJobExit(ok bool, err error) error {
	switch {
	case err != nil:
		return exit(1, err.Error())
	case !ok:
		return exit(1, "")
	}
	return nil
}

// WaitVerdict is what `guard heal --wait` does once the engine's
// WaitHeals returned.
type WaitVerdict struct {
	Say  []string // lines for stderr, in guard's voice, before anything else
	Done bool     // heal nothing more: end with Exit
	Exit error    // with Done, the exit (nil: status 0)
}

// AfterWait decides `guard heal --wait [NAME...]` after waiting on the
// heals in progress for names (all of them with none) followed them and
// ended with err. A signal, or a heal that is stopped or stuck (75), ends
// the command with err's own status: healing in the foreground would wait
// on the same locks. Another error is said and, with names, the heal goes
// on in the foreground. With no name the command waits and does nothing
// more: the heals in progress, not a heal of everything in the manifest
// (docs/healing-in-the-background.md); then an error is exit 1, and having
// nothing to wait for is said.
func AfterWait(names []string, followed int, err error) WaitVerdict {
	var v WaitVerdict
	if err != nil {
		if code := guard.ExitStatus(err); code > 128 || code == guard.StatusHealing {
			return WaitVerdict{Done: true, Exit: exit(code, err.Error())}
		}
		v.Say = append(v.Say, err.Error())
	}
	if len(names) > 0 {
		return v
	}
	v.Done = true
	switch {
	case err != nil:
		v.Exit = exit(1, "")
	case followed == 0:
		v.Say = append(v.Say, "no heal is running in the background; nothing to wait for")
	}
	return v
}

// HealExit is how `guard heal` ends once Heal returned ok: exit 1 when
// something could not be healed (each line above says what and how to fix
// it).
func HealExit(ok bool) error {
	if !ok {
		return exit(1, "some things could not be healed (see above)")
	}
	return nil
}

// StatusExit is how `guard status` ends: 125 when it could not look (guard
// itself failed), 1 when something that was here is broken or guard's
// setup is off, else 0 (not fetched yet is not broken).
func StatusExit(healthy bool, err error) error {
	switch {
	case err != nil:
		return exit(125, err.Error())
	case !healthy:
		return exit(1, "")
	}
	return nil
}
