package units_test

import (
	"errors"
	"testing"

	"github.com/sandbox-guard/guard/guard/units"
)

func TestOneLine(t *testing.T) {
	if got := units.OneLine(errors.New("a\nb\nc")); got != "a; b; c" {
		t.Errorf("OneLine = %q; want %q", got, "a; b; c")
	}
}

func TestLastLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"one":                  "one",
		"a\nb\n":               "b",
		"a\r\nb  \r\n\n  \n":   "b",
		"[ 50%] Building\rx\r": "x",
	} {
		if got := units.LastLine([]byte(in)); got != want {
			t.Errorf("LastLine(%q) = %q; want %q", in, got, want)
		}
	}
}
