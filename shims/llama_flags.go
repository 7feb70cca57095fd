package shims

// llamaFlag describes a llama-completion flag as written (long flags with "_"
// already turned into "-", as llama.cpp does): its canonical name, shared by
// all its spellings, and how many words follow it as values. The table holds
// the flags guard reads or rewrites and the value flags a script is likely to
// pass (llama.cpp common/arg.cpp); a flag not in it is guessed: it takes the
// next word when that word does not look like a flag. A switch statement
// keeps the table free at start-up.
func llamaFlag(name string) (canon string, values int, known bool) {
	switch name {
	// Flags guard reads or rewrites.
	case "-m", "--model":
		return "model", 1, true
	case "-p", "--prompt":
		return "prompt", 1, true
	case "-f", "--file":
		return "file", 1, true
	case "-n", "--predict", "--n-predict":
		return "n-predict", 1, true
	case "-ngl", "--gpu-layers", "--n-gpu-layers":
		return "n-gpu-layers", 1, true
	case "-t", "--threads":
		return "threads", 1, true
	case "-c", "--ctx-size":
		return "ctx-size", 1, true
	case "-fa", "--flash-attn": // on|off|auto; a bare -fa is an error
		return "flash-attn", 1, true
	case "-cnv", "--conversation":
		return "conversation", 0, true
	case "-no-cnv", "--no-conversation":
		return "no-conversation", 0, true
	case "-i", "--interactive":
		return "interactive", 0, true
	case "-if", "--interactive-first":
		return "interactive-first", 0, true
	case "-e", "--escape":
		return "escape", 0, true
	case "--no-escape":
		return "no-escape", 0, true

	// Other value flags, so that their values are never read as flags.
	case "-tb", "--threads-batch":
		return "threads-batch", 1, true
	case "-b", "--batch-size":
		return "batch-size", 1, true
	case "-ub", "--ubatch-size":
		return "ubatch-size", 1, true
	case "-s", "--seed":
		return "seed", 1, true
	case "-r", "--reverse-prompt":
		return "reverse-prompt", 1, true
	case "-sys", "--system-prompt":
		return "system-prompt", 1, true
	case "-sysf", "--system-prompt-file":
		return "system-prompt-file", 1, true
	case "-bf", "--binary-file":
		return "binary-file", 1, true
	case "-j", "--json-schema":
		return "json-schema", 1, true
	case "-jf", "--json-schema-file":
		return "json-schema-file", 1, true
	case "-l", "--logit-bias":
		return "logit-bias", 1, true
	case "-ctk", "--cache-type-k":
		return "cache-type-k", 1, true
	case "-ctv", "--cache-type-v":
		return "cache-type-v", 1, true
	case "-mu", "--model-url":
		return "model-url", 1, true
	case "-hf", "-hfr", "--hf-repo":
		return "hf-repo", 1, true
	case "-hff", "--hf-file":
		return "hf-file", 1, true
	case "-hft", "--hf-token":
		return "hf-token", 1, true
	case "-lv", "--verbosity", "--log-verbosity":
		return "verbosity", 1, true
	case "-ot", "--override-tensor":
		return "override-tensor", 1, true
	case "-C", "--cpu-mask":
		return "cpu-mask", 1, true
	case "-Cr", "--cpu-range":
		return "cpu-range", 1, true
	case "-dev", "--device":
		return "device", 1, true
	case "-sm", "--split-mode":
		return "split-mode", 1, true
	case "-ts", "--tensor-split":
		return "tensor-split", 1, true
	case "-mg", "--main-gpu":
		return "main-gpu", 1, true
	case "-dt", "--defrag-thold":
		return "defrag-thold", 1, true
	case "-np", "--parallel":
		return "parallel", 1, true
	case "-ncmoe", "--n-cpu-moe":
		return "n-cpu-moe", 1, true
	case "--temp", "--top-k", "--top-p", "--min-p", "--typical", "--repeat-penalty",
		"--repeat-last-n", "--presence-penalty", "--frequency-penalty", "--mirostat",
		"--mirostat-lr", "--mirostat-ent", "--dynatemp-range", "--dynatemp-exp",
		"--xtc-probability", "--xtc-threshold", "--dry-multiplier", "--dry-base",
		"--dry-allowed-length", "--dry-penalty-last-n", "--dry-sequence-breaker",
		"--samplers", "--sampling-seq", "--keep", "--in-prefix", "--in-suffix",
		"--grammar", "--grammar-file", "--chat-template", "--chat-template-file",
		"--chat-template-kwargs", "--lora", "--control-vector", "--log-file",
		"--override-kv", "--mmproj", "--image", "--prio", "--prio-batch", "--poll",
		"--numa", "--rope-scaling", "--rope-scale", "--rope-freq-base",
		"--rope-freq-scale", "--prompt-cache", "--reasoning-format", "--reasoning-budget",
		"--in-file", "--cache-reuse", "--spm-infill":
		return name[2:], 1, true
	case "--lora-scaled", "--control-vector-scaled", "--control-vector-layer-range":
		return name[2:], 2, true

	// Switches that are common in scripts, so that a word after them is not
	// mistaken for their value.
	case "-st", "--single-turn":
		return "single-turn", 0, true
	case "-mli", "--multiline-input":
		return "multiline-input", 0, true
	case "-v", "--verbose", "--log-verbose":
		return "verbose", 0, true
	case "-cb", "--cont-batching":
		return "cont-batching", 0, true
	case "-nocb", "--no-cont-batching":
		return "no-cont-batching", 0, true
	case "-nkvo", "--no-kv-offload":
		return "no-kv-offload", 0, true
	case "--verbose-prompt", "--no-display-prompt", "--display-prompt", "--simple-io",
		"--ignore-eos", "--no-mmap", "--mlock", "--log-disable", "--no-perf", "--jinja",
		"--no-jinja", "--no-warmup", "--warmup", "--check-tensors", "--no-context-shift",
		"--context-shift", "--special", "--prompt-cache-all", "--prompt-cache-ro",
		"--log-prefix", "--log-timestamps":
		return name[2:], 0, true
	}
	return "", 0, false
}
