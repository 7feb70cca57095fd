package progress

import (
	"testing"
	"unicode/utf8"
)

// A progress line clipped to the terminal never ends in half a character.
func TestClipNeverCutsACharacter(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"building llama.cpp", "Ünïcödé status line ✓✓✓", "日本語のステータス"} {
		for n := 2; n <= len(s)+1; n++ {
			if got := clip(s, n); !utf8.ValidString(got) {
				t.Fatalf("clip(%q, %d) = %q", s, n, got)
			}
		}
	}
}
