// Package guard is the engine behind every shim call and command. The call
// path reads top to bottom in call.go: load the manifest (config.go), mend
// evicted shims (install.Repair), resolve the real target (resolve), heal
// what the call needs under a lock (target.go: builds and packages;
// llama.go: models), plan the attempts (shims), run them (runner) and log
// what happened (heallog). Each capability lives in its own small package;
// this one wires them in order and holds what only a call has: its budget
// (budget.go), the attempt loop of a llama call or a fallback chain
// (attempts.go: each attempt healed, run, judged, retried or followed by
// the next), and the detached heals a call waits for (detach.go).
package guard
