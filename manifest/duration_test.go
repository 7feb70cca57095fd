package manifest_test

import (
	"testing"
	"time"

	"github.com/sandbox-guard/guard/manifest"
)

func TestDurationText(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		out  string
	}{
		{"30s", 30 * time.Second, "30s"},
		{"300s", 300 * time.Second, "5m"},
		{"30m", 30 * time.Minute, "30m"},
		{"2h", 2 * time.Hour, "2h"},
		{"1h30m", 90 * time.Minute, "1h30m"},
		{"90s", 90 * time.Second, "1m30s"},
		{"150ms", 150 * time.Millisecond, "150ms"},
		{"", 0, "0s"},
		{" 3s ", 3 * time.Second, "3s"},
	}
	for _, tt := range tests {
		var d manifest.Duration
		if err := d.UnmarshalText([]byte(tt.in)); err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if d.D() != tt.want {
			t.Errorf("%q parsed as %v, want %v", tt.in, d.D(), tt.want)
		}
		out, err := d.MarshalText()
		if err != nil || string(out) != tt.out {
			t.Errorf("%q marshals as %q (%v), want %q", tt.in, out, err, tt.out)
		}
		var back manifest.Duration
		if err := back.UnmarshalText(out); err != nil || back != d {
			t.Errorf("%q does not read back: %v %v", out, back, err)
		}
	}
}

// A duration that does not parse is kept as an error for validation to
// report with its line, rather than stopping the decoder.
func TestDurationBadTextIsReportedByParse(t *testing.T) {
	for _, in := range []string{"45", "soon", "1d", "-2562047h47m16.854775808s"} {
		var d manifest.Duration
		if err := d.UnmarshalText([]byte(in)); err != nil {
			t.Fatalf("%q: UnmarshalText failed: %v", in, err)
		}
		if d.D() >= 0 {
			t.Errorf("%q: got %v, want the invalid marker", in, d.D())
		}
	}
}
