package shims_test

import (
	"math"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/shims"
)

func TestBudget(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name string
		base time.Duration
		tps  float64
		n    int
		cap  time.Duration
		want time.Duration
	}{
		{"small model, 100 tokens", 30 * s, 20, 100, 300 * s, 35 * s},
		{"r1, 200 tokens", 45 * s, 10, 200, 300 * s, 65 * s},
		{"fraction of a second", 0, 20, 10, 300 * s, 500 * time.Millisecond},
		{"n absent (-1) gets the cap", 30 * s, 20, -1, 300 * s, 300 * s},
		{"n -2 gets the cap", 30 * s, 20, -2, 300 * s, 300 * s},
		{"never above the cap", 30 * s, 20, 100000, 300 * s, 300 * s},
		{"huge n does not overflow", 30 * s, 1e-300, math.MaxInt, 300 * s, 300 * s},
		{"base above the cap", 400 * s, 20, 1, 300 * s, 300 * s},
		{"n 0 is the base", 30 * s, 20, 0, 300 * s, 30 * s},
		{"unknown rate gets the cap", 30 * s, 0, 10, 300 * s, 300 * s},
		{"negative rate gets the cap", 30 * s, -5, 10, 300 * s, 300 * s},
		{"NaN rate gets the cap", 30 * s, math.NaN(), 10, 300 * s, 300 * s},
		{"infinite rate is the base", 30 * s, math.Inf(1), 10, 300 * s, 30 * s},
		{"nothing at all is one second", 0, 20, 0, 300 * s, s},
		{"nothing at all under a tiny cap", 0, 20, 0, 50 * time.Millisecond, 50 * time.Millisecond},
		{"negative base counts as zero", -10 * s, 10, 20, 300 * s, 2 * s},
		{"no cap means the default", 30 * s, 20, -1, 0, shims.DefaultCap},
		{"negative cap means the default", 30 * s, 20, 100, -s, 35 * s},
	}
	for _, tt := range tests {
		got := shims.Budget(tt.base, tt.tps, tt.n, tt.cap)
		if got != tt.want {
			t.Errorf("%s: Budget(%v, %v, %d, %v) = %v, want %v", tt.name, tt.base, tt.tps, tt.n, tt.cap, got, tt.want)
		}
		if got <= 0 {
			t.Errorf("%s: Budget = %v, want > 0", tt.name, got)
		}
	}
}
