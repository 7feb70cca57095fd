package runner

// waitSyscalls are the arm64 system calls that wait on descriptors, by
// number (include/uapi/asm-generic/unistd.h).
var waitSyscalls = []sysWait{
	{63, waitRead},   // read
	{65, waitRead},   // readv
	{67, waitRead},   // pread64
	{69, waitRead},   // preadv
	{286, waitRead},  // preadv2
	{73, waitPoll},   // ppoll
	{72, waitSelect}, // pselect6
	{22, waitEpoll},  // epoll_pwait
	{441, waitEpoll}, // epoll_pwait2
}
