package commands

import "github.com/sandbox-guard/guard/guard/models/verify"

// State is what `guard status` says of a shim, a tool or a model: the
// "state" of its JSON (docs/status-json.md). The report, heal's plan and
// which compare these constants, never the words.
type State string

// The states of a shim (ShimState), a tool (ToolState) and a model
// (ModelState). A model's are verify's, plus StateNotFetched.
const (
	StateOK       State = "ok"
	StateMissing  State = "missing"
	StateOutdated State = "outdated"  // shim: guard's, not yet linked to its copy
	StateNotGuard State = "not-guard" // shim: a file or link guard did not put there
	StateStale    State = "stale"     // shim: a link for a tool the manifest no longer has; model: hashed again on the next call
	StateBroken   State = "broken"    // shim: guard's own copy cut off; tool: a library does not resolve
	StateNotBuilt State = "not-built" // tool: its recipe never built it here

	StateNotFetched   State = "not-fetched" // model: never downloaded here
	StateUnverified         = State(verify.Unverified)
	StateHashMismatch       = State(verify.HashMismatch)
	StateNotRegular         = State(verify.NotRegular)
)

// modelUsable reports whether a call may use a model in state as it is.
func modelUsable(state State) bool { return verify.Status(state).Healthy() }

// HealState is how `guard heal` left one thing it looked at (HealResult).
type HealState string

// The states of heal's summary; the would- ones are a dry run's.
const (
	HealOK        HealState = "ok"
	HealHealed    HealState = "healed"
	HealRemoved   HealState = "removed"
	HealFailed    HealState = "failed"
	HealMissing   HealState = "missing" // auth
	HealStarted   HealState = "started" // a stash_to push
	HealWouldHeal HealState = "would-heal"
	HealWouldFail HealState = "would-fail"
)

// jobKind is what a heal job of heal's plan does.
type jobKind string

const (
	jobBuild    jobKind = "build"
	jobPackage  jobKind = "package"
	jobDownload jobKind = "download"
	jobVerify   jobKind = "verify"
	jobNone     jobKind = "none" // nothing heals it
)
