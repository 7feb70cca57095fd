// Package runner runs the real tool once: either by replacing guard with it
// (Exec, the fast path when nothing needs watching) or as a supervised child
// (Run).
//
// A supervised child lives in its own process group, so that a timeout can
// take down everything the tool started and not only the tool itself: a
// grandchild left holding an output pipe would otherwise keep the call alive.
// Ending a run is always the same sequence: SIGTERM (and SIGCONT, so a stopped
// group can act on it) to the group, SIGKILL to the group after the grace
// period, and once the child has exited a last SIGKILL to the group while the
// unreaped child still pins its process group id, so the id cannot have been
// reused by an unrelated group.
//
// Output nothing needs to read goes straight from the tool to the caller's
// files: with only a budget, guard hands the tool its own descriptors and
// does no work per byte. Otherwise output is observed on its way to the
// caller's writers. Two watchdogs read it: a stall watchdog that counts only
// output which really advances (a spinner redrawing the same line is not
// progress) and a prompt watchdog that, after a quiet period at an
// unfinished line, asks the kernel whether the tool waits for input
// (waiting.go) and reads the line only to know what it asks. A captured
// answer keeps its first CaptureMemory bytes in memory and the rest in an
// anonymous temp file.
//
// At a terminal the child holds the terminal while it runs; when it stops
// (Ctrl-Z), guard stops too, so the shell's job control sees its job stop,
// and continues the child when it is continued itself.
//
// The package does not read the manifest and does not log: Run reports what
// happened in a Result and the caller decides what to log and what to try
// next.
package runner
