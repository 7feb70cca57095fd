package shims_test

import (
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/shims"
)

// Fuzz inputs carry an argument list as one string with NUL between the
// arguments: exec can never pass a NUL inside an argument, so every list is
// reachable, spaces and empty arguments included.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

func FuzzParseCompletion(f *testing.F) {
	for _, s := range []string{
		"-m\x00a.gguf\x00-p\x00hi there\x00-n\x0064",
		"--model=a\x00--n-predict=-1\x00-cnv",
		"-p\x00-m\x00-f\x00x\x00-no-cnv",
		"-n\x00 12abc\x00--lora-scaled\x00a\x000.5",
		"-m",
	} {
		f.Add(s, "", false)
	}
	f.Fuzz(func(t *testing.T, args, fileText string, tty bool) {
		argv := splitArgs(args)
		call, err := shims.ParseCompletion(argv)
		out, dropped, serr := shims.ToSimple(argv, fileText)
		if err != nil {
			if serr == nil {
				t.Errorf("ParseCompletion failed (%v) but ToSimple did not", err)
			}
			return
		}
		ni := shims.NonInteractive(argv, call, tty)
		again, err := shims.ParseCompletion(ni)
		if err != nil {
			t.Fatalf("NonInteractive output does not parse: %v (%q)", err, ni)
		}
		if !tty && again.Interactive && !again.NoCnv {
			t.Errorf("still interactive without a tty: %q", ni)
		}
		withModel := shims.WithModel(argv, "new.gguf")
		// WithModel stops at a stray word (llama-simple's prompt); llama-completion
		// refuses such arguments anyway.
		if c, err := shims.ParseCompletion(withModel); err != nil || (c.Model != "new.gguf" && !shims.HasStrayWord(argv)) {
			t.Errorf("WithModel(%q) = %q: model %q, err %v", argv, withModel, c.Model, err)
		}
		_ = shims.AddDefaults(argv, []string{"-t", "1", "-fa", "off"})
		if serr == nil {
			if _, err := shims.ParseSimple(out); err != nil {
				t.Errorf("ToSimple output %q does not parse as llama-simple: %v (dropped %q)", out, err, dropped)
			}
		}
		_, _ = shims.PlanLlama(shims.LlamaPlanInput{
			Tool: shims.LlamaCompletion, Args: argv, StdinTTY: tty, Defaults: []string{"-t", "1"},
			Model:         shims.ModelInfo{Path: "/m/a", FallbackPath: "/m/b"},
			FallbackTools: []string{shims.LlamaSimple}, PromptFileText: fileText,
		})
	})
}

func FuzzParseSimple(f *testing.F) {
	for _, s := range []string{
		"-m\x00a.gguf\x00-n\x0032\x00hello\x00world",
		"-m\x00a\x00-p\x00hi\x00-t\x004",
		"-ngl\x00auto",
		"-m",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		argv := splitArgs(args)
		call, err := shims.ParseSimple(argv)
		withModel := shims.WithModelSimple(argv, "new.gguf")
		if err != nil {
			return
		}
		c, err := shims.ParseSimple(withModel)
		if err != nil || c.Model != "new.gguf" || c.Prompt != call.Prompt || c.N != call.N {
			t.Errorf("WithModelSimple(%q) = %q: %+v, err %v; was %+v", argv, withModel, c, err, call)
		}
		_, _ = shims.PlanLlama(shims.LlamaPlanInput{Tool: shims.LlamaSimple, Args: argv,
			Model: shims.ModelInfo{Path: "/m/a", FallbackPath: "/m/b"}})
	})
}

func FuzzNpxArgs(f *testing.F) {
	for _, s := range [][2]string{
		{"cowsay\x00--yes\x00hi", "--yes"},
		{"-y\x00-y\x00cowsay", "--yes"},
		{"--no\x00cowsay", "--yes"},
		{"-p\x00cowsay\x00-c\x00cowsay hi", "--yes\x00--loglevel\x00error"},
		{"-q=x\x00-y=false\x00--\x00-y", "-y"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, args, forced string) {
		argv, force := splitArgs(args), splitArgs(forced)
		npxForce := force
		if npxForce == nil {
			npxForce = shims.DefaultNpxForced
		}
		for _, got := range [][]string{shims.NpxArgs(argv, force), shims.ForceArgs(argv, force)} {
			if !hasInOrder(got, argv) {
				t.Fatalf("output %q lost or reordered input %q", got, argv)
			}
			if len(got) > len(argv)+len(npxForce) {
				t.Fatalf("output %q longer than input plus forced", got)
			}
			// Everything added sits in front.
			if !equalTail(got, argv) {
				t.Fatalf("output %q does not end with the input %q", got, argv)
			}
		}
	})
}

// hasInOrder reports whether want is a subsequence of got.
func hasInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func equalTail(got, tail []string) bool {
	if len(tail) > len(got) {
		return false
	}
	off := len(got) - len(tail)
	for i := range tail {
		if got[off+i] != tail[i] {
			return false
		}
	}
	return true
}
