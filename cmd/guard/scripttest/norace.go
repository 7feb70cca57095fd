package scripttest

// raceEnabled is whether the tests run with the race detector (race.go):
// the guard the scripts run is built the same way.
var raceEnabled = false
