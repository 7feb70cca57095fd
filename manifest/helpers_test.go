package manifest_test

import (
	"encoding/json"
	"testing"
)

// equalJSON compares two values by their JSON form, which covers every
// exported field, including the names filled from map keys.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(ja) != string(jb) {
		t.Logf("first:  %s\nsecond: %s", ja, jb)
		return false
	}
	return true
}
