package runner

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A tool waits for input when the kernel says so: one of its processes is
// asleep in a read of the stdin guard gave it (or in poll, select or epoll
// with that stdin among what it waits for: node's event loop, python's
// selectors), and none of them runs. That needs no wording, and guard asks
// only once the output has been quiet at an unfinished line, so a tool at
// work costs nothing. Linux tells it in /proc: each thread's state
// (task/TID/stat) and the system call it sleeps in with its arguments
// (task/TID/syscall), the target of each descriptor (fd/N), the
// descriptors an epoll instance watches (fdinfo/N), and for poll and select
// the descriptor sets in the process's memory (mem).

// waitKind is how a system call waits on a descriptor.
type waitKind uint8

const (
	waitRead   waitKind = iota + 1 // read, readv, ...: the descriptor is the first argument
	waitPoll                       // poll, ppoll: an array of struct pollfd, and its length
	waitSelect                     // select, pselect6: the highest descriptor+1, and the read set
	waitEpoll                      // epoll_wait and friends: the epoll descriptor
)

// waitsForInput reports whether the tool whose first process is root waits
// for input on the file in: a process it started (root or a descendant)
// sleeps in a read of in, or in a poll, select or epoll that includes it,
// and none of them runs (state R) or waits for a disk (D). known is false
// when the kernel could not say: no system call table for this machine, or
// a process guard may not inspect (a setuid sudo asking for a password),
// which might be the one waiting; the caller then falls back to the text.
func waitsForInput(root int, in fileID) (waiting, known bool) {
	if in == (fileID{}) || len(waitSyscalls) == 0 {
		return false, false
	}
	hidden := false
	pids := []int{root}
	for i := 0; i < len(pids) && i < maxInspected; i++ {
		pid := pids[i]
		dir := "/proc/" + strconv.Itoa(pid) + "/task/"
		tids, err := readNames(dir)
		if err != nil {
			continue // gone meanwhile
		}
		for _, tid := range tids {
			task := dir + tid + "/"
			switch threadState(task + "stat") {
			case 'R', 'D':
				return false, true
			case 0, 'Z', 'X':
				continue // gone, or going
			}
			pids = append(pids, children(task+"children")...)
			nr, args, ok := sleepingIn(task + "syscall")
			switch {
			case !ok:
				hidden = true
			case !waiting:
				waiting = waitsOn(pid, nr, args, in)
			}
		}
	}
	return waiting, waiting || !hidden
}

// maxInspected bounds the processes looked at in one check: a tool that
// forked a thousand workers is not sitting at a question.
const maxInspected = 256

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// threadState is the state letter of /proc/PID/task/TID/stat; 0 when it
// cannot be read.
func threadState(path string) byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return stateOf(b)
}

// stateOf finds the state in a stat line, "pid (comm) S ...", where comm
// may hold spaces and parentheses; 0 when there is none.
func stateOf(b []byte) byte {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// children reads the pids in a thread's children file.
func children(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// sleepingIn reads /proc/PID/task/TID/syscall (see parseSyscall); ok is
// false when the file cannot be read (a process guard may not inspect).
func sleepingIn(path string) (nr int, args [6]uint64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1, args, false
	}
	nr, args = parseSyscall(b)
	return nr, args, true
}

// parseSyscall reads a syscall file: "NR ARG0 ... ARG5 SP PC" while the
// thread sleeps in a system call, "running", or "-1 SP PC" outside one.
// nr is -1 unless the thread sleeps in a call that waits on descriptors.
func parseSyscall(b []byte) (nr int, args [6]uint64) {
	f := strings.Fields(string(b))
	if len(f) < 7 {
		return -1, args // running, or not in a system call
	}
	nr, err := strconv.Atoi(f[0])
	if _, waits := waitSyscall(nr); err != nil || !waits {
		return -1, args
	}
	for i := range args {
		v, err := strconv.ParseUint(strings.TrimPrefix(f[i+1], "0x"), 16, 64)
		if err != nil {
			return -1, args
		}
		args[i] = v
	}
	return nr, args
}

// sysWait is one system call that waits on descriptors, by number: a
// list the compiler lays out, so that no map is built when guard starts.
type sysWait struct {
	nr   int
	kind waitKind
}

// waitSyscall returns how system call nr waits on descriptors; false when
// it does not.
func waitSyscall(nr int) (waitKind, bool) {
	for _, w := range waitSyscalls {
		if w.nr == nr {
			return w.kind, true
		}
	}
	return 0, false
}

// waitsOn reports whether system call nr, with args, of process pid waits
// for input on in.
func waitsOn(pid, nr int, args [6]uint64, in fileID) bool {
	proc := "/proc/" + strconv.Itoa(pid) + "/"
	switch kind, _ := waitSyscall(nr); kind {
	case waitRead:
		return fdIs(proc, int64(args[0]), in)
	case waitPoll:
		return pollWaitsOn(proc, args[0], args[1], in)
	case waitSelect:
		return selectWaitsOn(proc, args[0], args[1], in)
	case waitEpoll:
		return epollWaitsOn(proc, int64(args[0]), in)
	}
	return false
}

// fdIs reports whether descriptor fd of the process is the file in.
func fdIs(proc string, fd int64, in fileID) bool {
	if fd < 0 || fd > 1<<20 {
		return false
	}
	var st unix.Stat_t
	if unix.Stat(proc+"fd/"+strconv.FormatInt(fd, 10), &st) != nil {
		return false
	}
	return uint64(st.Dev) == in.dev && st.Ino == in.ino
}

// readMem reads n bytes at addr of the process's memory.
func readMem(proc string, addr uint64, n int) []byte {
	if addr == 0 || n <= 0 || n > 64<<10 {
		return nil
	}
	f, err := os.Open(proc + "mem")
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		return nil
	}
	return b
}

// pollWaitsOn reads the struct pollfd array (int fd; short events; short
// revents) of a poll and looks for in among the descriptors polled for
// reading.
func pollWaitsOn(proc string, addr, n uint64, in fileID) bool {
	b := readMem(proc, addr, int(min(n, 4096))*8)
	for i := 0; i+8 <= len(b); i += 8 {
		fd := int32(binary.NativeEndian.Uint32(b[i:]))
		events := binary.NativeEndian.Uint16(b[i+4:])
		if events&(unix.POLLIN|pollRdNorm) != 0 && fdIs(proc, int64(fd), in) {
			return true
		}
	}
	return false
}

// selectWaitsOn reads the read set (an array of longs, one bit a
// descriptor) of a select and looks for in among its descriptors.
func selectWaitsOn(proc string, nfds, addr uint64, in fileID) bool {
	nfds = min(nfds, 1024)
	b := readMem(proc, addr, int((nfds+63)/64*8))
	for fd := uint64(0); fd < nfds && int(fd/8) < len(b); fd++ {
		// The set is an array of native longs: on a little-endian
		// machine, descriptor fd is bit fd%8 of byte fd/8.
		word := b[fd/64*8 : fd/64*8+8]
		if binary.NativeEndian.Uint64(word)&(1<<(fd%64)) != 0 && fdIs(proc, int64(fd), in) {
			return true
		}
	}
	return false
}

// epollWaitsOn reads the descriptors an epoll instance watches from its
// fdinfo ("tfd: 0 events: 19 data: ..."), and looks for in among those
// watched for reading.
func epollWaitsOn(proc string, epfd int64, in fileID) bool {
	f, err := os.Open(proc + "fdinfo/" + strconv.FormatInt(epfd, 10))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[0] != "tfd:" || fields[2] != "events:" {
			continue
		}
		fd, err1 := strconv.ParseInt(fields[1], 10, 64)
		events, err2 := strconv.ParseUint(fields[3], 16, 32)
		if err1 == nil && err2 == nil && events&unix.EPOLLIN != 0 && fdIs(proc, fd, in) {
			return true
		}
	}
	return false
}

// pollRdNorm is POLLRDNORM, which x/sys/unix does not name on Linux.
const pollRdNorm = 0x40
