package shims

import (
	"fmt"
	"strings"
)

// LlamaCall is what guard needs to know about one llama call.
type LlamaCall struct {
	Model       string // value of -m/--model/--model=X ("" if none)
	N           int    // -n/--predict/--n-predict value; NSet false when absent
	NSet        bool
	Prompt      string // -p/--prompt value
	PromptSet   bool
	PromptFile  string // -f/--file value
	Interactive bool   // caller asked for conversation/interactive: -cnv, --conversation, -i, --interactive, --interactive-first, -if
	NoCnv       bool   // caller passed -no-cnv / --no-conversation
}

// ParseCompletion parses llama-completion arguments. Value flags take the
// next argument, whatever it looks like, or "=VALUE"; when a flag repeats,
// the last one counts, as in llama.cpp. Unknown flags are skipped (the
// arguments themselves are never changed here). A flag missing its value, or
// an -n that std::stoi would refuse, is an error.
func ParseCompletion(args []string) (LlamaCall, error) {
	var call LlamaCall
	flags, err := scanLlama(args)
	if err != nil {
		return call, err
	}
	for _, a := range flags {
		switch a.canon {
		case "model":
			call.Model = a.values[0]
		case "n-predict":
			n, ok := stoi(a.values[0])
			if !ok {
				return call, fmt.Errorf("flag %s: %q is not a number", a.name, a.values[0])
			}
			call.N, call.NSet = n, true
		case "prompt":
			call.Prompt, call.PromptSet = a.values[0], true
		case "file":
			call.PromptFile = a.values[0]
		case "conversation", "interactive", "interactive-first":
			call.Interactive = true
		case "no-conversation":
			call.NoCnv = true
		}
	}
	return call, nil
}

// ParseSimple parses llama-simple's own grammar: only -m, -n and -ngl are
// options, each with the next word as its value; the first other word starts
// the prompt and every word after it joins the prompt, separated by spaces.
// So "-p", "-t" or "--model" there are prompt text, as llama-simple reads
// them. A missing value or a number std::stoi refuses is an error, since
// llama-simple then prints its usage and exits 1.
func ParseSimple(args []string) (LlamaCall, error) {
	var call LlamaCall
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if w != "-m" && w != "-n" && w != "-ngl" {
			break
		}
		if i+1 >= len(args) {
			return call, fmt.Errorf("flag %s needs a value", w)
		}
		i++
		v := args[i]
		switch w {
		case "-m":
			call.Model = v
		case "-n", "-ngl":
			n, ok := stoi(v)
			if !ok {
				return call, fmt.Errorf("flag %s: %q is not a number", w, v)
			}
			if w == "-n" {
				call.N, call.NSet = n, true
			}
		}
	}
	if i < len(args) {
		call.Prompt, call.PromptSet = strings.Join(args[i:], " "), true
	}
	return call, nil
}

// nonInteractive makes a llama-completion call finish on its own. Every
// instruct model has a chat template, and with one llama-completion enters
// conversation mode and waits on stdin forever when stdin is an open pipe;
// -no-cnv makes it exit. So -no-cnv is appended unless the conversation
// mode already ends up off (the last of -cnv/-no-cnv is -no-cnv), or the
// caller asked for conversation or interactive mode AND stdinTTY says a
// person is there to answer.
//
// Without a terminal, -i/--interactive and -if/--interactive-first are taken
// out as well: -no-cnv does not switch them off and they wait on stdin in the
// same way. Arguments llama-completion would refuse anyway (a flag missing
// its value) are returned unchanged, so that a trailing "-p" never swallows
// the added flag as its prompt. dropped is the flags it took out.
func nonInteractive(args []string, call LlamaCall, stdinTTY bool) (out, dropped []string) {
	out = append([]string(nil), args...)
	if call.Interactive && stdinTTY {
		return out, nil
	}
	flags, err := scanLlama(args)
	if err != nil {
		return out, nil
	}
	out = out[:0]
	cnvOff := false
	next := 0
	for _, a := range flags {
		out = append(out, args[next:a.at]...)
		next = a.at + a.span
		switch a.canon {
		case "conversation":
			cnvOff = false
		case "no-conversation":
			cnvOff = true
		case "interactive", "interactive-first":
			if !stdinTTY {
				dropped = append(dropped, a.name)
				continue
			}
		}
		out = append(out, args[a.at:next]...)
	}
	out = append(out, args[next:]...)
	if !cnvOff {
		out = append(out, "-no-cnv")
	}
	return out, dropped
}

// AddDefaults appends each default flag, with its value, that the caller did
// not set. Spellings of one flag count as the same flag (-t/--threads,
// -c/--ctx-size, -fa/--flash-attn, -n/--predict/--n-predict, and a switch
// with its "no-" twin), so a caller's `-t 1` always beats a default `-t 4`.
// Defaults are grouped like llama-completion arguments: a value flag takes
// its value words. A default value flag whose value is missing is left out
// rather than appended bare, since it would swallow whatever follows it.
func AddDefaults(args []string, defaults []string) []string {
	out := append([]string(nil), args...)
	set := map[string]bool{}
	callerFlags, _ := scanLlama(args) // a broken tail still names the flags before it
	for _, a := range callerFlags {
		if a.name != "" {
			set[a.setting()] = true
		}
	}
	defFlags, _ := scanLlama(defaults)
	for _, d := range defFlags {
		if d.name == "" || set[d.setting()] {
			continue // a stray word, or the caller chose already
		}
		set[d.setting()] = true
		out = append(out, defaults[d.at:d.at+d.span]...)
	}
	return out
}

// WithModel returns llama-completion arguments with every model flag's value
// replaced by model, keeping how it was written (-m X, --model X,
// --model=X). With no model flag, "-m model" goes to the front. A model flag
// missing its value gets model as its value.
//
// It also serves llama-simple calls written the usual way: the walk stops at
// the first word that belongs to no flag, which in llama-simple is where the
// prompt starts, so prompt text is never rewritten. WithModelSimple follows
// llama-simple's grammar exactly.
func WithModel(args []string, model string) []string {
	out := append([]string(nil), args...)
	found := false
	flags, err := scanLlama(args)
	for _, a := range flags {
		if a.name == "" {
			return withModelFront(out, model, found)
		}
		if a.canon != "model" {
			continue
		}
		found = true
		if a.eq {
			out[a.at] = a.name + "=" + model
		} else {
			out[a.at+1] = model
		}
	}
	if err != nil {
		// Only the last word can miss its value.
		if last := args[len(args)-1]; last == "-m" || last == "--model" {
			return append(out, model)
		}
	}
	return withModelFront(out, model, found)
}

// WithModelSimple is WithModel for llama-simple's grammar: only "-m X" names
// the model, and only before the prompt starts.
func WithModelSimple(args []string, model string) []string {
	out := append([]string(nil), args...)
	found := false
	for i := 0; i < len(out); i += 2 {
		w := out[i]
		if w != "-m" && w != "-n" && w != "-ngl" {
			break
		}
		if i+1 >= len(out) {
			if w == "-m" {
				return append(out, model)
			}
			break
		}
		if w == "-m" {
			out[i+1] = model
			found = true
		}
	}
	return withModelFront(out, model, found)
}

func withModelFront(args []string, model string, found bool) []string {
	if found {
		return args
	}
	return append([]string{"-m", model}, args...)
}
