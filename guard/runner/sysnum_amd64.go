package runner

// waitSyscalls are the x86-64 system calls that wait on descriptors, by
// number (arch/x86/entry/syscalls/syscall_64.tbl).
var waitSyscalls = []sysWait{
	{0, waitRead},     // read
	{17, waitRead},    // pread64
	{19, waitRead},    // readv
	{295, waitRead},   // preadv
	{327, waitRead},   // preadv2
	{7, waitPoll},     // poll
	{271, waitPoll},   // ppoll
	{23, waitSelect},  // select
	{270, waitSelect}, // pselect6
	{232, waitEpoll},  // epoll_wait
	{281, waitEpoll},  // epoll_pwait
	{441, waitEpoll},  // epoll_pwait2
}
