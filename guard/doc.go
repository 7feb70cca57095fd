// Package guard is the engine behind every shim call and command. The call
// path reads top to bottom in call.go: load the manifest (config.go), mend
// evicted shims (install.Repair), resolve the real target (resolve), heal
// what the call needs under a lock (target.go: builds and packages;
// llama.go: models), plan the attempts (shims), run them (runner) and log
// what happened (heallog). Each step lives in its own small package; this
// one only wires them in order.
package guard
