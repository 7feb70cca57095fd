//go:build race

package scripttest

func init() { raceEnabled = true }
