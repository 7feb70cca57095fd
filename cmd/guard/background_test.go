package main

import (
	"os"
	"regexp"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	scriptCmds["bgpid"] = cmdBgPid
}

// bgpid FILE: write the pid that the last command's stderr gave for a
// background heal ("(pid N)") to FILE, for pidgone: a script waits for the
// detached heal it started to end before its folder goes.
func cmdBgPid(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: bgpid FILE")
	}
	m := regexp.MustCompile(`\(pid (\d+)\)`).FindAllStringSubmatch(ts.ReadFile("stderr"), -1)
	if m == nil {
		ts.Fatalf("no (pid N) in stderr")
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(m[len(m)-1][1]+"\n"), 0o644))
}
