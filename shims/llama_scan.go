package shims

import (
	"fmt"
	"strconv"
	"strings"
)

// llamaArg is one flag of a llama-completion argument list with its values,
// or one stray word (name "") that belongs to no flag.
type llamaArg struct {
	at     int      // index of the flag word in the argument list
	span   int      // words it covers: the flag and its separate values
	name   string   // the flag as written, up to any "="
	canon  string   // shared by every spelling of a known flag; as written otherwise
	known  bool     // the flag is in llamaFlag's table
	values []string // its values, the "=VALUE" one first
	eq     bool     // the first value came as name=VALUE
}

// setting names what a flag controls, so that a switch and its "no-" twin
// (-cnv and -no-cnv, -e and --no-escape) count as the same flag.
// Unknown flags get a "?" in front so that "---model" can never pass for -m.
func (a llamaArg) setting() string {
	s := a.canon
	if !a.known {
		s = strings.TrimLeft(s, "-")
	}
	if rest, ok := strings.CutPrefix(s, "no-"); ok && rest != "" {
		s = rest
	}
	if !a.known {
		s = "?" + s
	}
	return s
}

// scanLlama splits llama-completion arguments into flags and their values.
// A known value flag takes the next words whatever they look like, as
// llama.cpp does (`-p -x` prompts "-x"); "--name=VALUE" is read too. An
// unknown flag takes the next word only when it does not look like a flag.
// A flag missing its value is an error; the flags read before it are
// returned with it.
func scanLlama(args []string) ([]llamaArg, error) {
	var out []llamaArg
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !looksLikeFlag(w) {
			out = append(out, llamaArg{at: i, span: 1, values: []string{w}})
			continue
		}
		name, value, eq := strings.Cut(w, "=")
		if strings.HasPrefix(name, "--") {
			name = strings.ReplaceAll(name, "_", "-") // llama.cpp reads --n_predict as --n-predict
		}
		canon, want, known := llamaFlag(name)
		if known && eq && want == 0 {
			known = false // llama.cpp has no "--switch=VALUE"; treat it as a word of its own
		}
		if !known {
			name, value, eq = w, "", false
			canon = name
			want = 0
			if i+1 < len(args) && !looksLikeFlag(args[i+1]) {
				want = 1
			}
		}
		a := llamaArg{at: i, span: 1, name: name, canon: canon, known: known, eq: eq}
		if eq {
			a.values = append(a.values, value)
			want--
		}
		for ; want > 0; want-- {
			if i+1 >= len(args) {
				return out, fmt.Errorf("flag %s needs a value", name)
			}
			i++
			a.values = append(a.values, args[i])
			a.span++
		}
		out = append(out, a)
	}
	return out, nil
}

// looksLikeFlag reports whether w reads as a flag rather than a value: it
// starts with "-" and is not "-" alone or a negative number such as -1.
func looksLikeFlag(w string) bool {
	if len(w) < 2 || w[0] != '-' {
		return false
	}
	c := w[1]
	if c == '.' && len(w) > 2 {
		c = w[2]
	}
	return c < '0' || c > '9'
}

// stoi reads an int the way C++ std::stoi does, which is how both llama
// tools read -n: leading blanks, a sign, digits, and anything after the
// digits ignored; no digits or a value beyond 32 bits is an error.
func stoi(s string) (int, bool) {
	i := 0
	for i < len(s) && strings.IndexByte(" \t\n\v\f\r", s[i]) >= 0 {
		i++
	}
	start := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == digits {
		return 0, false
	}
	v, err := strconv.ParseInt(s[start:i], 10, 32)
	if err != nil {
		return 0, false
	}
	return int(v), true
}
