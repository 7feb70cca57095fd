// Package scripttest runs guard's end-to-end stories, the testscripts in
// testdata/script, against a guard binary built from cmd/guard: their
// custom commands (one table, harness.go), the download server each script
// gets, the helper programs they call by name. Only tests import it. The
// scripts run in the packages part1 to part4 below it, a quarter each, so
// that each part and cmd/guard's Go tests have go test's time limit for
// one package to themselves: together, in one package, they reached it on
// a loaded machine.
package scripttest
