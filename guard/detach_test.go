package guard

import (
	"testing"

	"github.com/sandbox-guard/guard/guard/healjob"
)

// What a call that cannot wait says of a heal in the background: a build
// another sandbox makes for the fleet names who builds; a restore names
// its source; any other phase leaves the heal's own words.
func TestDoingNamesWhoBuildsForTheFleet(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ phase, want string }{
		{"built by host-7 for the fleet", "the build of llama-cpp, built by host-7 for the fleet"},
		{"restoring from the stash or oci://r/s", "the restore of llama-cpp from the stash or oci://r/s"},
		{"for the fleet, step 1/2 cmake", "the build of llama-cpp"},
		{"built by hand", "the build of llama-cpp"},
		{"downloaded by host-2 for the fleet", "the build of llama-cpp, downloaded by host-2 for the fleet"},
	} {
		if got := doing(healjob.Record{What: "the build of llama-cpp", Phase: c.phase}); got != c.want {
			t.Errorf("phase %q: %q, want %q", c.phase, got, c.want)
		}
	}
}
