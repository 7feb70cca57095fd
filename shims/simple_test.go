package shims_test

import (
	"slices"
	"testing"

	"github.com/sandbox-guard/guard/shims"
)

func TestToSimple(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		file    string
		want    []string
		dropped []string
	}{
		{
			name:    "drops -t -fa --ctx-size, prompt last",
			args:    []string{"-m", "a.gguf", "-p", "tell me a joke", "-t", "4", "-fa", "on", "--ctx-size", "2048", "-n", "64"},
			want:    []string{"-m", "a.gguf", "-n", "64", "tell me a joke"},
			dropped: []string{"-t 4", "-fa on", "--ctx-size 2048"},
		},
		{
			name: "prompt with spaces stays one argument",
			args: []string{"-p", "a b  c", "-m", "x"},
			want: []string{"-m", "x", "a b  c"},
		},
		{
			name:    "-n -1 dropped",
			args:    []string{"-m", "x", "-n", "-1", "-p", "hi"},
			want:    []string{"-m", "x", "hi"},
			dropped: []string{"-n -1"},
		},
		{
			name:    "-n -2 dropped",
			args:    []string{"-m", "x", "--n-predict=-2"},
			want:    []string{"-m", "x"},
			dropped: []string{"--n-predict=-2"},
		},
		{
			name: "--predict becomes -n",
			args: []string{"--predict", "7", "--model=x"},
			want: []string{"-m", "x", "-n", "7"},
		},
		{
			name: "-ngl kept, long forms too",
			args: []string{"-m", "x", "--n-gpu-layers", "0", "-p", "hi"},
			want: []string{"-m", "x", "-ngl", "0", "hi"},
		},
		{
			name:    "-ngl auto dropped",
			args:    []string{"-m", "x", "-ngl", "auto"},
			want:    []string{"-m", "x"},
			dropped: []string{"-ngl auto"},
		},
		{
			name: "-f uses the file text, one trailing newline cut",
			args: []string{"-m", "x", "-f", "p.txt"},
			file: "from the file\n\n",
			want: []string{"-m", "x", "from the file\n"},
		},
		{
			name: "last of -p and -f wins",
			args: []string{"-f", "p.txt", "-p", "typed"},
			file: "file",
			want: []string{"typed"},
		},
		{
			name: "escapes processed like llama-completion",
			args: []string{"-p", `a\nb\t\x41\\\q`},
			want: []string{"a\nb\tA\\\\q"},
		},
		{
			name: "--no-escape keeps the text",
			args: []string{"--no-escape", "-p", `a\nb`},
			want: []string{`a\nb`},
		},
		{
			name:    "interactive and conversation flags dropped",
			args:    []string{"-m", "x", "-cnv", "-i", "-no-cnv", "--temp", "0.2", "-p", "hi"},
			want:    []string{"-m", "x", "hi"},
			dropped: []string{"-cnv", "-i", "-no-cnv", "--temp 0.2"},
		},
		{
			name: "no prompt, no prompt argument",
			args: []string{"-m", "x"},
			want: []string{"-m", "x"},
		},
		{
			name: "empty prompt kept",
			args: []string{"-m", "x", "-p", ""},
			want: []string{"-m", "x", ""},
		},
		{
			name: "prompt looking like a flag",
			args: []string{"-p", "-t 4"},
			want: []string{"-t 4"},
		},
		{
			name: "last -m wins",
			args: []string{"-m", "a", "-m", "b"},
			want: []string{"-m", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dropped, err := shims.ToSimple(tt.args, tt.file)
			if err != nil {
				t.Fatalf("ToSimple(%q): %v", tt.args, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ToSimple(%q) = %q, want %q", tt.args, got, tt.want)
			}
			if !slices.Equal(dropped, tt.dropped) {
				t.Errorf("ToSimple(%q) dropped %q, want %q", tt.args, dropped, tt.dropped)
			}
			// What llama-simple reads back must be what was meant.
			call, err := shims.ParseSimple(got)
			if err != nil {
				t.Fatalf("ParseSimple(%q): %v", got, err)
			}
			if n := len(got); n > 0 && call.PromptSet && call.Prompt != got[n-1] {
				t.Errorf("llama-simple would read prompt %q, want %q", call.Prompt, got[n-1])
			}
		})
	}
}

func TestToSimpleErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-m"},
		{"-n", "x"},
		{"-p", "-n"},
		{"-p", "-m"},
		{"-p", "-ngl"},
	} {
		if got, _, err := shims.ToSimple(args, ""); err == nil {
			t.Errorf("ToSimple(%q) = %q, want an error", args, got)
		}
	}
}
