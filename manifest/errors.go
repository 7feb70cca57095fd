package manifest

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
)

// Error is a syntax or validation error that names the file and line, so a
// person can go straight to the place to fix. Line is 0 when the position is
// not known (for example an error about the file as a whole).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.File + ": " + e.Msg
}

// joinErrors orders errs by line, so the report reads top to bottom like the
// file, and joins them; a single error is returned as itself.
func joinErrors(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	slices.SortStableFunc(errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	all := make([]error, len(errs))
	for i, e := range errs {
		all[i] = e
	}
	return errors.Join(all...)
}
