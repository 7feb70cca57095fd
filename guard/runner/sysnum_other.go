//go:build !amd64 && !arm64

package runner

// waitSyscalls is empty where guard has no system call table: the kernel
// cannot be asked, and the prompt watchdog goes by the text alone.
var waitSyscalls []sysWait
