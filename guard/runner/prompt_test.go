package runner

import (
	"strings"
	"testing"
	"time"
)

func TestDetectPrompt(t *testing.T) {
	for _, tc := range []struct {
		tail string
		text string
		kind promptKind
	}{
		{"Need to install the following packages:\ncowsay@1.6.0\nOk to proceed? (y) ", "Ok to proceed? (y)", yesNoPrompt},
		{"Do you want to continue? [Y/n] ", "Do you want to continue? [Y/n]", yesNoPrompt},
		{"Overwrite? [y/N]", "Overwrite? [y/N]", yesNoPrompt},
		{"Remove it? (y/N) ", "Remove it? (y/N)", yesNoPrompt},
		{"Install? (Y/n): ", "Install? (Y/n):", yesNoPrompt},
		{"Proceed (yes/no)? ", "Proceed (yes/no)?", yesNoPrompt},
		{"\x1b[1mOk to proceed?\x1b[22m (y) ", "Ok to proceed? (y)", yesNoPrompt},
		{"⠙ fetching\r\x1b[KOk to proceed? (y) ", "Ok to proceed? (y)", yesNoPrompt},
		{"Password: ", "Password:", passwordPrompt},
		{"[sudo] password for bob: ", "[sudo] password for bob:", passwordPrompt},
		{"Enter passphrase for key '/root/.ssh/id_ed25519': ", "Enter passphrase for key '/root/.ssh/id_ed25519':", passwordPrompt},
		{"PASSWORD (again) [y/N]: ", "PASSWORD (again) [y/N]:", passwordPrompt}, // never answered, even as yes/no
		{"\x1b[32m?\x1b[39m \x1b[1mWhat is your project named?\x1b[22m › my-app", "? What is your project named? › my-app", inquirerPrompt},
		{"? Would you like to use TypeScript? › No / Yes", "? Would you like to use TypeScript? › No / Yes", inquirerPrompt},
		{"? Pick a template ❯ react", "? Pick a template ❯ react", inquirerPrompt},
		{"llama says hi\n\n> ", ">", replPrompt},
		{"\x1b[1m> \x1b[0m", ">", replPrompt},
		{">>> ", ">>>", replPrompt},
		// Unfinished lines guard does not recognise: questions only when
		// the kernel says the tool reads its input.
		{"Project name: ", "Project name:", otherPrompt},
		{"a > b", "a > b", otherPrompt},
		{"> quoted text", "> quoted text", otherPrompt},
		{"loading model (y) weights", "loading model (y) weights", otherPrompt},
		{"password reset done", "password reset done", otherPrompt},
		{"build: 45%", "build: 45%", otherPrompt},
		{"\xff\xfe(y", "\xff\xfe(y", otherPrompt},
		// No unfinished line.
		{"", "", noPrompt},
		{"Ok to proceed? (y)\n", "", noPrompt}, // a finished line: the tool went on
		{"\x1b[0m", "", noPrompt},
	} {
		text, kind := detectPrompt([]byte(tc.tail))
		if text != tc.text || kind != tc.kind {
			t.Errorf("detectPrompt(%q) = %q, %d; want %q, %d", tc.tail, text, kind, tc.text, tc.kind)
		}
	}
}

func TestYesIsDefault(t *testing.T) {
	for prompt, want := range map[string]bool{
		"Ok to proceed? (y)": true,
		"Continue? [Y/n]":    true,
		"Install? (Yes/no):": true,
		"Run it? [y]":        true,
		"Overwrite? [y/N]":   false,
		"Remove it? (y/N)":   false,
		"Proceed? (y/n)":     false,
		"Proceed? (Y/N)":     false,
		"Proceed (yes/no)?":  false,
		"continue connecting (yes/no/[fingerprint])?": false,
		"Project name:": false,
	} {
		if got := yesIsDefault(prompt); got != want {
			t.Errorf("yesIsDefault(%q) = %v, want %v", prompt, got, want)
		}
	}
}

func TestYesReply(t *testing.T) {
	for prompt, want := range map[string]string{
		"Ok to proceed? (y)":                          "y\n",
		"Continue? [Y/n]":                             "y\n",
		"Proceed (yes/no)?":                           "yes\n",
		"continue connecting (yes/no/[fingerprint])?": "yes\n",
	} {
		if got := yesReply(prompt, "\n"); got != want {
			t.Errorf("yesReply(%q) = %q, want %q", prompt, got, want)
		}
	}
	if got := yesReply("Ok to proceed? (y)", "\r"); got != "y\r" {
		t.Errorf("on a terminal: %q", got)
	}
}

func TestAnswerSplitsLineOfPipe(t *testing.T) {
	w := newWatcher(time.Time{}, Spec{})
	w.observe(outStream, []byte("First? [y/N] "))
	p, ok := w.prompt(time.Now(), 0, time.Hour)
	if !ok || p.text != "First? [y/N]" {
		t.Fatalf("first prompt: %+v %v", p, ok)
	}
	w.answered(p)
	if _, ok := w.prompt(time.Now(), 0, time.Hour); ok {
		t.Fatal("the same appearance was offered again")
	}
	w.observe(outStream, []byte("Second? [y/N] "))
	if p, ok := w.prompt(time.Now(), 0, time.Hour); !ok || p.text != "Second? [y/N]" {
		t.Fatalf("second prompt: %+v %v", p, ok)
	}
}

func TestTailIsBounded(t *testing.T) {
	w := newWatcher(time.Time{}, Spec{})
	for range 100 {
		w.observe(errStream, []byte(strings.Repeat("x", 100)))
	}
	w.observe(errStream, []byte("\nPassword: "))
	if n := len(w.streams[errStream].tail); n > tailSize {
		t.Fatalf("tail holds %d bytes", n)
	}
	if p, ok := w.prompt(time.Now(), 0, time.Hour); !ok || p.kind != passwordPrompt || p.stream != errStream {
		t.Fatalf("got %+v %v", p, ok)
	}
}

func FuzzDetectPrompt(f *testing.F) {
	f.Add([]byte("\x1b]0;t\x07? q › \x1b[Kx\r(y/n) "))
	f.Fuzz(func(t *testing.T, p []byte) {
		text, _ := detectPrompt(p) // none of these may panic on any input
		yesIsDefault(text)
		yesReply(text, "\n")
	})
}

// A question printed with a newline is offered only after the longer quiet,
// and as the last line the tool finished.
func TestFinishedLineIsOfferedAfterTheLongerQuiet(t *testing.T) {
	w := newWatcher(time.Time{}, Spec{})
	w.observe(outStream, []byte("creating app\nWhat is your project named?\n\n"))
	now := time.Now()
	if _, ok := w.prompt(now, 0, time.Hour); ok {
		t.Fatal("a finished line offered before the longer quiet")
	}
	p, ok := w.prompt(now, 0, 0)
	if !ok || p.text != "What is your project named?" || !p.finished || p.kind != otherPrompt {
		t.Fatalf("finished question: %+v %v", p, ok)
	}
	for tail, want := range map[string]string{"": "", "open": "", "a\n\r\n": "a", "\x1b[1mQ?\x1b[0m\n": "Q?"} {
		if got := lastFinishedLine([]byte(tail)); got != want {
			t.Errorf("lastFinishedLine(%q) = %q, want %q", tail, got, want)
		}
	}
}
