package models

import (
	"strings"

	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/verify"
	"github.com/sandbox-guard/guard/manifest"
)

// Seen is what guard remembers of the model file at a path, whether or not
// the file is still there: enough for status to tell a model that was never
// fetched here from one evicted since, and to say what bringing it back
// costs.
type Seen struct {
	// Ever says guard downloaded or hashed a file at this path: its stamp,
	// a small file in the state folder, outlives the model's eviction.
	Ever bool
	// DeclaredBy names who declared the sha256 the file was verified
	// against: "manifest" for a pin, else the url whose X-Linked-Etag gave
	// it; "" when it was not verified. It describes the file Check calls
	// ok.
	DeclaredBy string
	// Partial is the bytes of a partial download waiting to be resumed: a
	// missing model costs its size minus these.
	Partial int64
}

// Seen returns what guard remembers of the model m at path. It reads one
// stamp and stats one partial file: cheap enough for every status.
func (h *Healer) Seen(m *manifest.Model, path string) Seen {
	rec, ok := verify.Recorded(h.stampDir(), path)
	s := Seen{Ever: ok, DeclaredBy: rec.DeclaredBy}
	if m.SHA256 != "" {
		s.DeclaredBy = ""
		if ok && rec.SHA256 == strings.ToLower(strings.TrimSpace(m.SHA256)) {
			s.DeclaredBy = "manifest"
		}
	}
	s.Partial = fetch.PartialBytes(path)
	return s
}
