package commands

import (
	"bytes"
	"testing"
)

// guard stash list oci://… trusts this machine's own key for that listing
// only: the engine's stash, which is built once and shared by every later
// use in the process, keeps the manifest's trusted keys alone.
func TestStashListRemoteLeavesTheEnginesKeysAlone(t *testing.T) {
	var out bytes.Buffer
	e := statusEngine(t, "", &out)
	if err := StashKeygen(e, &out, "test-1"); err != nil {
		t.Fatal(err)
	}
	before := len(e.Stash().Trusted)
	// Nothing listens there: the listing fails once the key was added.
	if err := StashListRemote(e, &out, "oci://127.0.0.1:1/guard/stash", false); err == nil {
		t.Fatal("listing a registry that is not there: no error")
	}
	if got := len(e.Stash().Trusted); got != before {
		t.Errorf("the engine's stash trusts %d keys after the listing, %d before: its own key leaked into it", got, before)
	}
}
