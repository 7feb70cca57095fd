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
// Output is observed on its way to the caller's writers. Two watchdogs read
// it: a stall watchdog that counts only output which really advances (a
// spinner redrawing the same line is not progress) and a prompt watchdog that,
// after a quiet period, looks at the unfinished last line for a question the
// tool is waiting on.
//
// The package does not read the manifest and does not log: Run reports what
// happened in a Result and the caller decides what to log and what to try
// next.
package runner
