package guard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandbox-guard/guard/guard/healjob"
)

// RunJob is `guard heal --job SPEC [--for CALLER]`: the detached heal
// itself, CALLER the tool whose call started it (its events name it). It adopts
// the job's lock (fd 3, from the call that started it), heals in this
// process under its own limit, its progress going to the job's record, and
// writes the result. ok false with a nil error is a failure written to
// the record and not to be printed: the call waiting for the heal copies
// its stderr and prints the record's message as its own last line, so the
// line would show twice.
func (e *Engine) RunJob(ctx context.Context, arg, caller string) (ok bool, err error) {
	spec, err := parseJobSpec(arg)
	if err != nil {
		return false, err
	}
	spec.caller = caller
	rec, err := e.jobRecord(spec)
	if err != nil {
		return false, err
	}
	lock := os.NewFile(jobLockFD, "job-lock")
	if lock == nil {
		return false, errors.New("heal --job: no job lock on fd 3; guard starts this itself")
	}
	// Not for the build's steps: an orphaned step must not pass for the
	// heal (the build lock already waits for it).
	syscall.CloseOnExec(jobLockFD)
	j, err := healjob.Adopt(e.c.StateDir, rec.Key, lock)
	if err != nil {
		return false, err
	}
	e.observeProgress(j.Progress)
	// Its events say that a call started it and left it running, and name
	// that call's tool (the spec's caller), not "guard heal".
	e.log.Detached = true
	err = e.healHere(ctx, spec)
	if !finishJob(j, err) {
		return false, err
	}
	return err == nil, nil
}

// healHere heals spec in this process (the detached heal, or a call whose
// heal could not be detached): bounded by ctx and the heal's own limit.
func (e *Engine) healHere(ctx context.Context, spec jobSpec) error {
	if spec.kind == healjob.KindModel {
		m := e.c.M.ModelByFile(spec.name)
		if m == nil {
			return fmt.Errorf("no model %s in the manifest", filepath.Base(spec.name))
		}
		return underSignals(ctx, func(ctx context.Context) error {
			return e.Models().Ensure(ctx, cmp.Or(spec.caller, "guard heal"), m, spec.name, false)
		})
	}
	tool := e.c.M.Tool(spec.name)
	if tool == nil {
		return fmt.Errorf("no tool named %q in the manifest", spec.name)
	}
	_, err := e.healTool(ctx, tool, e.ToolHealth(tool), healHere)
	return err
}
