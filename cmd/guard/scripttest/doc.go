// Package scripttest runs guard's end-to-end stories, the testscripts in
// testdata/script, against a guard binary built from cmd/guard. It is a
// package of its own so that the stories and cmd/guard's Go tests each
// have go test's whole time limit for one package: together they came near
// it on a loaded machine. It holds no code but its tests.
package scripttest
