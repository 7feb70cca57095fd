package scripttest

// raceEnabled is whether this test runs with the race detector
// (race_test.go): the guard the scripts run is built the same way.
var raceEnabled = false
