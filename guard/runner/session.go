package runner

import (
	"bytes"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A tool that is not handed guard's own terminal leads a session of its
// own (setsid; under a pty it always does). A shell with job control on
// (`set -m`, common in bash wrappers) puts each background job in a process
// group of its own, and a signal to the tool's first group does not reach
// those; every one of them is still in the tool's session, which only a
// process calling setsid itself leaves. So a timeout, an interrupt and the
// kill after the grace signal every group of the session, and the lifeline
// does the same when guard dies. See docs/process-lifetime.md.

// sessionGroups lists the process groups of the live (not zombie)
// processes in session sid, read from /proc/*/stat.
func sessionGroups(sid int) []int {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	seen := map[int]bool{}
	var groups []int
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		pgrp, session, ok := statIDs(b)
		if ok && session == sid && !seen[pgrp] {
			seen[pgrp] = true
			groups = append(groups, pgrp)
		}
	}
	return groups
}

// statIDs reads the process group and session of a live process from its
// stat line, "pid (comm) S ppid pgrp session ...", where comm may hold
// spaces, parentheses and newlines; ok is false for a zombie (or a process
// going), whose ids no longer matter, and for a line it cannot read.
func statIDs(b []byte) (pgrp, session int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:]) // state ppid pgrp session ...
	if len(f) < 4 || len(f[0]) != 1 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, 0, false
	}
	pgrp, err1 := strconv.Atoi(string(f[2]))
	session, err2 := strconv.Atoi(string(f[3]))
	if err1 != nil || err2 != nil || pgrp <= 0 || session <= 0 {
		return 0, 0, false
	}
	return pgrp, session, true
}

// maxSweeps bounds the rounds of signalSession: a round finds the groups
// made since the one before (a job started while the last was signalled).
const maxSweeps = 50

// signalSession sends sig to every process group of session sid, first
// group first, and looks again until a look finds no group it has not
// signalled. It must run while the session's leader is not reaped, so that
// sid is still the tool's: a leader's pid is not reused while it is.
func signalSession(sid, first int, sig unix.Signal) error {
	done := map[int]bool{first: true}
	err := unix.Kill(-first, sig)
	if errors.Is(err, unix.ESRCH) {
		err = nil
	}
	for range maxSweeps {
		more := false
		for _, g := range sessionGroups(sid) {
			if done[g] {
				continue
			}
			done[g], more = true, true
			_ = unix.Kill(-g, sig)
		}
		if !more {
			break
		}
	}
	return err
}
