package install

import (
	"strings"
	"testing"
)

// TestRestoreFetchesGiveUp: restore.sh runs at shell start, so every
// download it makes gives up on a server that stalls mid-transfer (curl's
// low-speed limit; wget's read timeout with a bounded number of tries:
// its default is 20) rather than holding the shell for ten minutes.
func TestRestoreFetchesGiveUp(t *testing.T) {
	script := restoreScript("/s", "/st", Restore{URLs: []string{"https://example.invalid/guard"}, SHA256: "ab"})
	checked := 0
	for _, line := range strings.Split(script, "\n") {
		for _, tool := range []struct{ cmd, flags string }{
			{"curl -", "--connect-timeout --speed-limit --speed-time --max-time"},
			{"wget -", "-T -t"},
		} {
			if !strings.Contains(line, tool.cmd) {
				continue
			}
			checked++
			for _, flag := range strings.Fields(tool.flags) {
				if !strings.Contains(line, " "+flag+" ") {
					t.Errorf("restore.sh runs %s without %s: %s", strings.TrimSuffix(tool.cmd, " -"), flag, strings.TrimSpace(line))
				}
			}
		}
	}
	if checked != 2 {
		t.Fatalf("found %d curl and wget lines in restore.sh, want 2:\n%s", checked, script)
	}
}
