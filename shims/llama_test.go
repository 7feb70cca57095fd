package shims_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/shims"
)

func TestParseCompletion(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want shims.LlamaCall
	}{
		{"nothing", nil, shims.LlamaCall{}},
		{"-m", []string{"-m", "a.gguf"}, shims.LlamaCall{Model: "a.gguf"}},
		{"--model", []string{"--model", "a.gguf"}, shims.LlamaCall{Model: "a.gguf"}},
		{"--model=", []string{"--model=a.gguf"}, shims.LlamaCall{Model: "a.gguf"}},
		{"-m=", []string{"-m=a.gguf"}, shims.LlamaCall{Model: "a.gguf"}},
		{"--model= with = in path", []string{"--model=dir=x/a.gguf"}, shims.LlamaCall{Model: "dir=x/a.gguf"}},
		{"last -m wins", []string{"-m", "a", "--model", "b"}, shims.LlamaCall{Model: "b"}},
		{"-n", []string{"-n", "64"}, shims.LlamaCall{N: 64, NSet: true}},
		{"--predict", []string{"--predict", "8"}, shims.LlamaCall{N: 8, NSet: true}},
		{"--n-predict=", []string{"--n-predict=-1"}, shims.LlamaCall{N: -1, NSet: true}},
		{"--n_predict underscore", []string{"--n_predict", "5"}, shims.LlamaCall{N: 5, NSet: true}},
		{"-n -2", []string{"-n", "-2"}, shims.LlamaCall{N: -2, NSet: true}},
		{"-n like stoi", []string{"-n", " 12abc"}, shims.LlamaCall{N: 12, NSet: true}},
		{"-p", []string{"-p", "hello world"}, shims.LlamaCall{Prompt: "hello world", PromptSet: true}},
		{"empty -p", []string{"-p", ""}, shims.LlamaCall{PromptSet: true}},
		{"-p takes a dash word", []string{"-p", "-m", "-m", "x"}, shims.LlamaCall{Prompt: "-m", PromptSet: true, Model: "x"}},
		{"--prompt=", []string{"--prompt=a=b"}, shims.LlamaCall{Prompt: "a=b", PromptSet: true}},
		{"-f", []string{"-f", "p.txt"}, shims.LlamaCall{PromptFile: "p.txt"}},
		{"--file", []string{"--file", "p.txt"}, shims.LlamaCall{PromptFile: "p.txt"}},
		{"-cnv", []string{"-cnv"}, shims.LlamaCall{Interactive: true}},
		{"--conversation", []string{"--conversation"}, shims.LlamaCall{Interactive: true}},
		{"-i", []string{"-i"}, shims.LlamaCall{Interactive: true}},
		{"--interactive", []string{"--interactive"}, shims.LlamaCall{Interactive: true}},
		{"-if", []string{"-if"}, shims.LlamaCall{Interactive: true}},
		{"--interactive-first", []string{"--interactive-first"}, shims.LlamaCall{Interactive: true}},
		{"-no-cnv", []string{"-no-cnv"}, shims.LlamaCall{NoCnv: true}},
		{"--no-conversation", []string{"--no-conversation"}, shims.LlamaCall{NoCnv: true}},
		{"unknown flags kept out of the way", []string{"--temp", "0.7", "--foo", "-m", "a", "--seed", "-1"},
			shims.LlamaCall{Model: "a"}},
		{"look-alikes are not flags", []string{"-model", "x", "---m", "y", "-prompt", "-cnv=1"}, shims.LlamaCall{}},
		{"value of a known flag is not a flag", []string{"-r", "-m", "-n", "3"}, shims.LlamaCall{N: 3, NSet: true}},
		{"everything", []string{"-m", "m.gguf", "-p", "hi there", "-n", "32", "-t", "1", "-fa", "off", "-no-cnv"},
			shims.LlamaCall{Model: "m.gguf", Prompt: "hi there", PromptSet: true, N: 32, NSet: true, NoCnv: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shims.ParseCompletion(tt.args)
			if err != nil {
				t.Fatalf("ParseCompletion(%q): %v", tt.args, err)
			}
			if got != tt.want {
				t.Errorf("ParseCompletion(%q) = %+v, want %+v", tt.args, got, tt.want)
			}
		})
	}
}

func TestParseCompletionErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-m"},
		{"--model"},
		{"-p", "x", "-n"},
		{"-f"},
		{"-fa"},
		{"-t"},
		{"-n", "abc"},
		{"-n", ""},
		{"--n-predict=x"},
		{"-n", "99999999999"},
		{"--lora-scaled", "a.gguf"},
	} {
		if call, err := shims.ParseCompletion(args); err == nil {
			t.Errorf("ParseCompletion(%q) = %+v, want an error", args, call)
		}
	}
}

func TestParseSimple(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want shims.LlamaCall
	}{
		{"nothing", nil, shims.LlamaCall{}},
		{"model only", []string{"-m", "a.gguf"}, shims.LlamaCall{Model: "a.gguf"}},
		{"all options", []string{"-m", "a", "-n", "16", "-ngl", "0", "hello"},
			shims.LlamaCall{Model: "a", N: 16, NSet: true, Prompt: "hello", PromptSet: true}},
		{"prompt words joined", []string{"-m", "a", "tell", "me  a", "joke"},
			shims.LlamaCall{Model: "a", Prompt: "tell me  a joke", PromptSet: true}},
		{"completion flags are prompt text", []string{"-m", "a", "-p", "hi", "-t", "4", "-fa", "on"},
			shims.LlamaCall{Model: "a", Prompt: "-p hi -t 4 -fa on", PromptSet: true}},
		{"options after the prompt are text", []string{"-m", "a", "hi", "-m", "b", "-n", "3"},
			shims.LlamaCall{Model: "a", Prompt: "hi -m b -n 3", PromptSet: true}},
		{"--model is text", []string{"--model", "a"}, shims.LlamaCall{Prompt: "--model a", PromptSet: true}},
		{"-m= is text", []string{"-m=a"}, shims.LlamaCall{Prompt: "-m=a", PromptSet: true}},
		{"-m takes a dash word", []string{"-m", "-n", "x"}, shims.LlamaCall{Model: "-n", Prompt: "x", PromptSet: true}},
		{"last -n wins", []string{"-n", "1", "-n", "2"}, shims.LlamaCall{N: 2, NSet: true}},
		{"empty prompt word", []string{"-m", "a", ""}, shims.LlamaCall{Model: "a", PromptSet: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shims.ParseSimple(tt.args)
			if err != nil {
				t.Fatalf("ParseSimple(%q): %v", tt.args, err)
			}
			if got != tt.want {
				t.Errorf("ParseSimple(%q) = %+v, want %+v", tt.args, got, tt.want)
			}
		})
	}
	for _, args := range [][]string{{"-m"}, {"-m", "a", "-n"}, {"-ngl"}, {"-n", "x"}, {"-ngl", "auto"}} {
		if _, err := shims.ParseSimple(args); err == nil {
			t.Errorf("ParseSimple(%q): want an error", args)
		}
	}
}

func TestNonInteractive(t *testing.T) {
	tests := []struct {
		name string
		args string
		tty  bool
		want string
	}{
		{"added", "-m a -p hi", false, "-m a -p hi -no-cnv"},
		{"added with a tty too", "-m a -p hi", true, "-m a -p hi -no-cnv"},
		{"not twice", "-m a -no-cnv", false, "-m a -no-cnv"},
		{"long form counts", "--no-conversation -m a", false, "--no-conversation -m a"},
		{"-cnv with a person", "-m a -cnv", true, "-m a -cnv"},
		{"-cnv without a person", "-m a -cnv", false, "-m a -cnv -no-cnv"},
		{"--conversation without a person", "--conversation", false, "--conversation -no-cnv"},
		{"-i with a person", "-m a -i", true, "-m a -i"},
		{"-i without a person is dropped", "-m a -i -p hi", false, "-m a -p hi -no-cnv"},
		{"-if without a person is dropped", "-if --interactive-first --interactive -m a", false, "-m a -no-cnv"},
		{"-cnv after -no-cnv wins", "-no-cnv -cnv", false, "-no-cnv -cnv -no-cnv"},
		{"-no-cnv after -cnv wins", "-cnv -no-cnv", false, "-cnv -no-cnv"},
		{"-p value -no-cnv is a prompt", "-p -no-cnv", false, "-p -no-cnv -no-cnv"},
		{"-p value -i is a prompt", "-p -i", false, "-p -i -no-cnv"},
		{"broken args left alone", "-m a -p", false, "-m a -p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := fields(tt.args)
			call, _ := shims.ParseCompletion(args)
			got := shims.NonInteractive(args, call, tt.tty)
			if !slices.Equal(got, fields(tt.want)) {
				t.Errorf("NonInteractive(%q, tty=%v) = %q, want %q", args, tt.tty, got, tt.want)
			}
			again, _ := shims.ParseCompletion(got)
			if !slices.Equal(shims.NonInteractive(got, again, tt.tty), got) && !strings.Contains(tt.name, "broken") {
				t.Errorf("NonInteractive is not idempotent on %q", got)
			}
		})
	}
}

func TestAddDefaults(t *testing.T) {
	defaults := fields("-t 1 -fa off -c 2048 -n 256 --no-warmup")
	tests := []struct {
		name, args, want string
	}{
		{"all added", "-m a", "-m a -t 1 -fa off -c 2048 -n 256 --no-warmup"},
		{"caller's -t 1 kept", "-m a -t 4", "-m a -t 4 -fa off -c 2048 -n 256 --no-warmup"},
		{"--threads is -t", "--threads 2", "--threads 2 -fa off -c 2048 -n 256 --no-warmup"},
		{"--threads= is -t", "--threads=2", "--threads=2 -fa off -c 2048 -n 256 --no-warmup"},
		{"--ctx-size is -c", "--ctx-size 512", "--ctx-size 512 -t 1 -fa off -n 256 --no-warmup"},
		{"--flash-attn is -fa", "--flash-attn on", "--flash-attn on -t 1 -c 2048 -n 256 --no-warmup"},
		{"--predict is -n", "--predict 5", "--predict 5 -t 1 -fa off -c 2048 --no-warmup"},
		{"--n-predict is -n", "--n-predict -1", "--n-predict -1 -t 1 -fa off -c 2048 --no-warmup"},
		{"--warmup is --no-warmup", "--warmup", "--warmup -t 1 -fa off -c 2048 -n 256"},
		{"a prompt -t is not -t", "-p -t", "-p -t -t 1 -fa off -c 2048 -n 256 --no-warmup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shims.AddDefaults(fields(tt.args), defaults)
			if !slices.Equal(got, fields(tt.want)) {
				t.Errorf("AddDefaults(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
	if got := shims.AddDefaults(fields("-m a"), fields("-t 1 -t 2 -fa")); !slices.Equal(got, fields("-m a -t 1")) {
		t.Errorf("repeated and broken defaults: got %q", got)
	}
	if got := shims.AddDefaults(fields("-m a"), nil); !slices.Equal(got, fields("-m a")) {
		t.Errorf("no defaults: got %q", got)
	}
}

func TestWithModel(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"-m", "-m old.gguf -p hi", "-m new.gguf -p hi"},
		{"--model", "--model old.gguf", "--model new.gguf"},
		{"--model=", "--model=old.gguf -n 3", "--model=new.gguf -n 3"},
		{"-m=", "-m=old.gguf", "-m=new.gguf"},
		{"every one", "-m a --model b --model=c", "-m new.gguf --model new.gguf --model=new.gguf"},
		{"none", "-p hi", "-m new.gguf -p hi"},
		{"empty", "", "-m new.gguf"},
		{"missing value", "-p hi -m", "-p hi -m new.gguf"},
		{"prompt -m untouched", "-p -m -m old", "-p -m -m new.gguf"},
		{"llama-simple prompt untouched", "-m old -n 4 say -m x", "-m new.gguf -n 4 say -m x"},
		{"llama-simple no model", "hello -m x", "-m new.gguf hello -m x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := fields(tt.args)
			before := slices.Clone(args)
			got := shims.WithModel(args, "new.gguf")
			if !slices.Equal(got, fields(tt.want)) {
				t.Errorf("WithModel(%q) = %q, want %q", tt.args, got, tt.want)
			}
			if !slices.Equal(args, before) {
				t.Errorf("WithModel changed its input")
			}
		})
	}
}

func TestWithModelSimple(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"-m", "-m old -n 4 hi", "-m new.gguf -n 4 hi"},
		{"after -n", "-n 4 -m old hi", "-n 4 -m new.gguf hi"},
		{"none", "hi there", "-m new.gguf hi there"},
		{"prompt -m untouched", "-m old -p -m x", "-m new.gguf -p -m x"},
		{"--model is prompt text", "--model old", "-m new.gguf --model old"},
		{"missing value", "-n 3 -m", "-n 3 -m new.gguf"},
		{"empty", "", "-m new.gguf"},
	}
	for _, tt := range tests {
		got := shims.WithModelSimple(fields(tt.args), "new.gguf")
		if !slices.Equal(got, fields(tt.want)) {
			t.Errorf("%s: WithModelSimple(%q) = %q, want %q", tt.name, tt.args, got, tt.want)
		}
	}
}
