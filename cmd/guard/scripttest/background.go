package scripttest

import (
	"os"
	"regexp"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// waitgrep FILE REGEXP: wait (up to 60 s: a background process runs at
// nice 19, and the machine may be busy) until a line of FILE matches
// REGEXP: a process in the background has reached a point it logs.
func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: waitgrep FILE REGEXP")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	ts.Check(err)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ts.MkAbs(args[0])); err == nil && re.Match(b) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	ts.Fatalf("no line of %s matched %s within 60s", args[0], args[1])
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
