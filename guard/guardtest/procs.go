package guardtest

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is what a test of process lifetimes needs of one /proc/PID/stat.
type Proc struct {
	PID, PPID, PGID, SID int
	State                byte
	Comm                 string
}

func (p Proc) String() string { return fmt.Sprintf("%s[%d pgid %d]", p.Comm, p.PID, p.PGID) }

// DescribeProcs names ps for a failure message.
func DescribeProcs(ps []Proc) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, " ")
}

// LiveProcs lists live processes (zombies excluded: they are dead, just not
// yet reaped by whoever adopted them).
func LiveProcs() []Proc {
	ents, _ := os.ReadDir("/proc")
	var out []Proc
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		p, ok := ReadProcStat(pid)
		if ok && p.State != 'Z' && p.State != 'X' {
			out = append(out, p)
		}
	}
	return out
}

// ReadProcStat reads pid's /proc/PID/stat; false when it is gone.
func ReadProcStat(pid int) (Proc, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Proc{}, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return Proc{}, false
	}
	f := strings.Fields(s[end+2:])
	if len(f) < 4 {
		return Proc{}, false
	}
	p := Proc{PID: pid, State: f[0][0], Comm: s[open+1 : end]}
	p.PPID, _ = strconv.Atoi(f[1])
	p.PGID, _ = strconv.Atoi(f[2])
	p.SID, _ = strconv.Atoi(f[3])
	return p, true
}

// ProcsWhose lists the live processes whose /proc/PID/file (cmdline,
// environ) match says is theirs.
func ProcsWhose(file string, match func([]byte) bool) []Proc {
	var out []Proc
	for _, p := range LiveProcs() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/" + file)
		if err == nil && match(b) {
			out = append(out, p)
		}
	}
	return out
}

// SessionProcs lists the live processes of session sid.
func SessionProcs(sid int) []Proc {
	var out []Proc
	for _, p := range LiveProcs() {
		if p.SID == sid {
			out = append(out, p)
		}
	}
	return out
}

// KillSession SIGKILLs every process of the session, again and again until
// none is left: what a sandbox does when it stops. A process forking while
// we sweep is caught by the next pass.
func KillSession(sid int) {
	for range 50 {
		ps := SessionProcs(sid)
		if len(ps) == 0 {
			return
		}
		for _, p := range ps {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitProcsGone polls list until it is empty or limit passes, and returns what
// is left.
func WaitProcsGone(list func() []Proc, limit time.Duration) []Proc {
	deadline := time.Now().Add(limit)
	for {
		left := list()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// EnvProcs lists live processes whose environment holds the entry kv
// (KEY=VALUE), by pid.
func EnvProcs(kv string) []Proc {
	want := []byte("\x00" + kv + "\x00")
	var out []Proc
	for _, p := range LiveProcs() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/environ")
		if err == nil && bytes.Contains(append([]byte{0}, b...), want) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// Alive reports whether pid runs and is not a zombie.
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
