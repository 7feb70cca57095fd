package shims

import "time"

// DefaultCap is the cap a Budget gets when none is given: the manifest's
// default of 300 s for one whole call.
const DefaultCap = 300 * time.Second

// minBudget is what an attempt gets when its figures add up to nothing
// (no base, no tokens), so that it can at least start.
const minBudget = time.Second

// Budget is the time one attempt may run: base + n/tokensPerSecond. An
// unlimited n (any negative: -1 for absent, -2), or a rate that is not a
// positive number (unknown model), gets the cap, since nothing smaller can
// be promised. The result is never above cap and never <= 0: a sum of zero
// gets one second (or the cap, when that is smaller). A cap <= 0 means
// DefaultCap. A negative base counts as zero.
func Budget(base time.Duration, tokensPerSecond float64, n int, cap time.Duration) time.Duration {
	if cap <= 0 {
		cap = DefaultCap
	}
	if n < 0 || !(tokensPerSecond > 0) {
		return cap
	}
	base = max(base, 0)
	// In float seconds, so a huge n cannot overflow time.Duration.
	secs := base.Seconds() + float64(n)/tokensPerSecond
	if secs >= cap.Seconds() {
		return cap
	}
	d := time.Duration(secs * float64(time.Second))
	if d <= 0 {
		return min(minBudget, cap)
	}
	return d
}
