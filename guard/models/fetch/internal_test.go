package fetch

import (
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 0 ", 0},
		{"-3", 0},
		{"soon", 0},
		{"Sat, 01 Aug 2026 12:00:30 GMT", 30 * time.Second},
		{"Sat, 01 Aug 2026 11:00:00 GMT", 0},
		{"999999999", 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseContentRange(t *testing.T) {
	tests := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/*", 0, -1, true},
		{"bytes 100-199/150", 0, 0, false},
		{"bytes */200", 0, 0, false},
		{"items 1-2/3", 0, 0, false},
		{"bytes 5-4/10", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		s, _, tot, ok := parseContentRange(tt.in)
		if ok != tt.ok || (ok && (s != tt.start || tot != tt.total)) {
			t.Errorf("parseContentRange(%q) = %d %d %v", tt.in, s, tot, ok)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	for f := range 20 {
		b := backoff(time.Second, f)
		want := min(time.Second<<min(f, 10), maxBackoff)
		if b < want/2 || b > want*3/2 {
			t.Errorf("backoff(1s, %d) = %s, want within [%s, %s]", f, b, want/2, want*3/2)
		}
	}
}
