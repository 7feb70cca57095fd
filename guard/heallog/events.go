package heallog

// Name is the name of a heal event, its "event" field. Every name guard
// writes is one of the constants below, and docs/exit-status-and-events.md
// ("Heal log events") lists each of them (TestDocsListEveryEvent): a new
// event is a new constant here and a new row there, never a literal at the
// call, where a typo would be a silent new event.
type Name string

// The heal events, in the order docs/exit-status-and-events.md lists them.
const (
	Preflight      Name = "preflight"
	ShimRecreate   Name = "shim.recreate"
	PackageInstall Name = "package.install"
	BinaryRestore  Name = "binary.restore"
	StashPush      Name = "stash.push"
	FleetLease     Name = "fleet.lease"
	BinaryPrebuilt Name = "binary.prebuilt"
	BinaryRebuild  Name = "binary.rebuild"
	ModelDownload  Name = "model.download"
	ModelVerify    Name = "model.verify"
	AuthMissing    Name = "auth.missing"
	LockWait       Name = "lock.wait"
	Timeout        Name = "timeout"
	Stall          Name = "stall"
	PromptDetected Name = "prompt.detected"
	Retry          Name = "retry"
	Fallback       Name = "fallback"
	CacheStore     Name = "cache.store"
	BudgetLearned  Name = "budget.learned"
	CallEnd        Name = "call.end"
)

// Events lists every event name guard writes, in the order of the docs.
func Events() []Name {
	return []Name{
		Preflight, ShimRecreate, PackageInstall, BinaryRestore, BinaryPrebuilt,
		StashPush, FleetLease, BinaryRebuild, ModelDownload, ModelVerify, AuthMissing, LockWait,
		Timeout, Stall, PromptDetected, Retry, Fallback, CacheStore,
		BudgetLearned, CallEnd,
	}
}
