// Package shims holds the pure policies of guard's shims: how a call's
// arguments are rewritten (forced npx flags, non-interactive llama flags,
// defaults, model paths, llama-completion → llama-simple translation), how
// long one attempt may run, and which attempts a llama call may make.
//
// Nothing here does I/O: no files, no processes, no environment. Everything
// arrives as parameters so that every rule can be table-tested and fuzzed,
// and so that the engine (package guard) stays the only place with effects.
//
// The grammars follow the real tools, read from their sources and measured:
// npm 11's bin/npx-cli.js for where npx's own options end, llama.cpp's
// common/arg.cpp for llama-completion, and examples/simple for
// llama-simple's three options followed by a free-text prompt.
package shims
