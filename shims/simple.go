package shims

import (
	"fmt"
	"strings"
)

// ToSimple translates llama-completion arguments into llama-simple's, for
// the fallback run after llama-completion failed. llama-simple knows only
// -m, -n and -ngl and reads every other word as prompt text, so:
//
//   - the last -m/--model becomes "-m X";
//   - the last -n/--predict/--n-predict becomes "-n N", or is dropped when N
//     is negative (-1 unlimited, -2 until the context is full), leaving
//     llama-simple's own default of 32 tokens;
//   - the last -ngl/--n-gpu-layers/--gpu-layers becomes "-ngl N", or is
//     dropped when N is not a plain number (auto, all), which llama-simple
//     would refuse;
//   - the prompt, from the last of -p/--prompt and -f/--file, goes last as a
//     single argument however many spaces it holds. For -f, promptFileText
//     is the file's text (guard reads it; this package does no I/O) and, as
//     llama.cpp does, one trailing newline is cut. Escapes (\n, \t, \xHH…)
//     are processed as llama-completion does unless --no-escape was given,
//     because llama-simple passes its prompt through untouched;
//   - everything else is dropped and returned in dropped, one entry per flag
//     with its values ("-t 4", "-no-cnv"), for the log.
//
// No prompt flag means no prompt argument (llama-simple then uses its own).
// A prompt that is exactly -m, -n or -ngl cannot be passed, since
// llama-simple would read it as an option: that, and any argument error
// ParseCompletion reports, is an error.
func ToSimple(args []string, promptFileText string) (out []string, dropped []string, err error) {
	flags, err := scanLlama(args)
	if err != nil {
		return nil, nil, err
	}
	var (
		model, n, ngl []string
		prompt        string
		promptSet     bool
		escape        = true // llama.cpp's default
	)
	for _, a := range flags {
		switch a.canon {
		case "model":
			model = []string{"-m", a.values[0]}
		case "n-predict":
			v, ok := stoi(a.values[0])
			switch {
			case !ok:
				return nil, nil, fmt.Errorf("flag %s: %q is not a number", a.name, a.values[0])
			case v < 0:
				n = nil
				dropped = append(dropped, describe(a))
			default:
				n = []string{"-n", a.values[0]}
			}
		case "n-gpu-layers":
			if _, ok := stoi(a.values[0]); ok && isPlainInt(a.values[0]) {
				ngl = []string{"-ngl", a.values[0]}
			} else {
				ngl = nil
				dropped = append(dropped, describe(a))
			}
		case "prompt":
			prompt, promptSet = a.values[0], true
		case "file":
			prompt, promptSet = strings.TrimSuffix(promptFileText, "\n"), true
		case "escape":
			escape = true
		case "no-escape":
			escape = false
		default:
			dropped = append(dropped, describe(a))
		}
	}
	out = append(append(append(out, model...), n...), ngl...)
	if promptSet {
		if escape {
			prompt = processEscapes(prompt)
		}
		if prompt == "-m" || prompt == "-n" || prompt == "-ngl" {
			return nil, nil, fmt.Errorf("prompt %q would be read by llama-simple as an option", prompt)
		}
		out = append(out, prompt)
	}
	return out, dropped, nil
}

// describe renders a dropped flag with its values for the log.
func describe(a llamaArg) string {
	if a.name == "" {
		return a.values[0]
	}
	if a.eq {
		return strings.Join(append([]string{a.name + "=" + a.values[0]}, a.values[1:]...), " ")
	}
	return strings.Join(append([]string{a.name}, a.values...), " ")
}

// isPlainInt reports whether s is an optional sign and digits only, so that
// llama-simple reads the same number std::stoi gives guard.
func isPlainInt(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// processEscapes mirrors llama.cpp's string_process_escapes: \n \r \t \' \"
// \\ and \xHH become their characters; any other backslash pair, and a
// backslash at the very end, stay as written.
func processEscapes(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '\'', '"', '\\':
			b.WriteByte(s[i])
		case 'x':
			if i+2 < len(s) {
				if v, ok := hexByte(s[i+1], s[i+2]); ok {
					b.WriteByte(v)
					i += 2
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(s[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// hexByte reads two characters as llama.cpp's strtol(x, &end, 16) does when
// it must consume both: two hex digits, or a blank or sign before one digit.
func hexByte(a, b byte) (byte, bool) {
	hb, ok := hexDigit(b)
	if !ok {
		return 0, false
	}
	if ha, ok := hexDigit(a); ok {
		return ha<<4 | hb, true
	}
	switch a {
	case ' ', '\t', '\n', '\v', '\f', '\r', '+':
		return hb, true
	case '-':
		return -hb, true
	}
	return 0, false
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
