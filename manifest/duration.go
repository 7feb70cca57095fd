package manifest

import (
	"math"
	"strings"
	"time"
)

// Duration is a time.Duration written in TOML as a string such as "30s" or
// "2m" (Go's time.ParseDuration syntax). An empty string means zero.
type Duration time.Duration

// badDuration marks text that did not parse. UnmarshalText records it instead
// of failing because the TOML decoder stops at the first error; validation
// then reports every bad duration with its line, alongside the other errors.
const badDuration = Duration(math.MinInt64)

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalText implements encoding.TextUnmarshaler. It never fails: see
// badDuration.
func (d *Duration) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || Duration(v) == badDuration {
		*d = badDuration
		return nil
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler with the shortest form that
// reads back to the same value ("5m" rather than "5m0s").
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.String()), nil
}

// String formats like time.Duration but drops zero minute and second units,
// so durations written as "300s" or "30m" come back out as "5m" and "30m".
func (d Duration) String() string {
	s := time.Duration(d).String()
	if s == "0s" {
		return s
	}
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
		if t, ok := strings.CutSuffix(s, "h0m"); ok {
			s = t + "h"
		}
	}
	return s
}
