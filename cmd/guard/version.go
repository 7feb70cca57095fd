package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version, commit and date are stamped at build time with -ldflags "-X
// main.version=... -X main.commit=... -X main.date=..." (install.sh stamps
// the version, a release all three; docs/install.md).
var (
	version = "dev"
	commit  = ""
	date    = ""
)

// versionString is what guard --version prints: the version, the commit
// (the stamped one, else the one go build recorded from the checkout) and
// the Go release, then the build date when a release stamped it. A
// `go install MODULE@vX` build has no stamp: the module's version stands in.
func versionString() string {
	v, c := version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	s := fmt.Sprintf("%s (commit %s, %s", v, c, runtime.Version())
	if date != "" {
		s += ", built " + date
	}
	return s + ")"
}
