// Package manifest defines guard's manifest: which tools guard shims, how to
// rebuild them, which Debian packages provide their commands, which models
// they need (with exact sizes, optional sha256 and download URLs), the time
// budgets, the swarm roles, auth hints and the prompt cache.
//
// The manifest is TOML. A shim call reads it from its decoded copy
// (decoded.go), so Parse runs only when the manifest changed; the package
// does no work at init beyond go:embed, and builds the key-to-line index it
// needs for error messages only when there is an error to report. Every syntax and
// validation error is an *Error naming the file and line; validation collects
// all of them so one run of `guard manifest check` shows every mistake.
package manifest

import (
	"bytes"
	_ "embed"
	"path/filepath"
)

// Manifest is a parsed, defaulted and validated manifest. Paths starting with
// "~/" have been expanded with the home directory given to Parse.
type Manifest struct {
	Log       string            `toml:"log"`
	ShimDir   string            `toml:"shim_dir"`
	ModelsDir string            `toml:"models_dir"`
	StateDir  string            `toml:"state_dir"`
	Packages  map[string]string `toml:"packages,omitempty"` // command -> Debian package
	Builds    map[string]*Build `toml:"builds,omitempty"`
	Tools     map[string]*Tool  `toml:"tools,omitempty"`
	Budget    Budget            `toml:"budget"`
	Models    []*Model          `toml:"models,omitempty"`
	Swarm     Swarm             `toml:"swarm"`
	Auth      map[string]*Auth  `toml:"auth,omitempty"`
	Cache     CacheConf         `toml:"cache"`
	Stash     StashConf         `toml:"stash"`
	Registry  RegistryConf      `toml:"registry"`
	Self      *Self             `toml:"self,omitempty"`

	// Source is the file the manifest was read from, or EmbeddedSource.
	Source string `toml:"-"`

	gen string // Generation
	idx *index // a lazy manifest's decoded file (LoadDecoded); nil for a whole one
}

// EmbeddedSource is Manifest.Source for the built-in default manifest.
const EmbeddedSource = "(embedded default)"

// Build is a recipe that rebuilds evicted binaries: each step is an argv run
// in Dir, in order.
type Build struct {
	Name    string     `toml:"-"` // the key under [builds]
	Dir     string     `toml:"dir"`
	Repo    string     `toml:"repo,omitempty"` // cloned into Dir when Dir is missing
	Needs   []string   `toml:"needs,omitempty"`
	Steps   [][]string `toml:"steps"`
	Timeout Duration   `toml:"timeout,omitzero"` // heal timeout; default Budget.Heal
	// Outputs are the folders below Dir the steps write (default "build"):
	// the only place a scrub after an interrupted build may remove files.
	Outputs []string `toml:"outputs,omitempty"`
	// Targets are what a step's "{targets}" becomes (steps.go); without
	// the key, the file names of the paths of the tools built by this
	// recipe.
	Targets []string `toml:"targets,omitempty"`
	// StashFrom are read-only stashes other machines exported (`guard
	// stash export`, `guard stash push`): file:// folders, https URLs and
	// oci:// registries, tried in order after the local stash
	// (docs/stash.md).
	StashFrom []string `toml:"stash_from,omitempty"`
	// StashTo is a registry (oci://HOST/REPO) every good build's entry is
	// pushed to, signed, in the background (docs/registry.md).
	StashTo string `toml:"stash_to,omitempty"`
	// Prebuilt is the project's own release build a call may answer
	// with while the native build is made (docs/prebuilt.md); nil = none.
	Prebuilt *Prebuilt `toml:"prebuilt,omitempty"`
}

// Prebuilt names a project's release builds on GitHub: the releases of
// GitHub (OWNER/REPO), the asset of a tag for this machine (Asset, with
// {tag} and {arch}), an optional sha256 pin of that asset, and whether the
// native build is made after it (Native, default true).
type Prebuilt struct {
	GitHub string `toml:"github"`
	Asset  string `toml:"asset"`
	SHA256 string `toml:"sha256,omitempty"`
	Native *bool  `toml:"native,omitempty"`
}

// BuildsNative reports whether the native build is made after the
// prebuilt answers: true unless native = false.
func (p *Prebuilt) BuildsNative() bool { return p == nil || p.Native == nil || *p.Native }

// Tool is the policy for one shimmed command.
type Tool struct {
	Name     string            `toml:"-"` // the key under [tools]; also the shim's link name
	Path     string            `toml:"path,omitempty"`
	Build    string            `toml:"build,omitempty"`
	Package  string            `toml:"package,omitempty"`
	Args     []string          `toml:"args,omitempty"` // forced flags, added once
	Env      map[string]string `toml:"env,omitempty"`
	Fallback []string          `toml:"fallback,omitempty"` // tool names tried after a failure
	Timeout  Duration          `toml:"timeout,omitzero"`   // per-call budget when no model budget applies; 0 = none
	Stall    Duration          `toml:"stall,omitzero"`     // no new output for this long ends the attempt; 0 = off
	Prompts  string            `toml:"prompts,omitempty"`  // "" | "answer" | "yes" | "kill"
	Defaults []string          `toml:"defaults,omitempty"` // flags added only when the caller did not set them
	Cache    *bool             `toml:"cache,omitempty"`    // prompt cache; nil = the tool's default
}

// Prompt policies for Tool.Prompts: what guard does when the tool waits
// for input at a question (docs/decisions.md: "Which questions guard
// answers").
const (
	PromptsAnswer = "answer" // answer yes where the question's default is yes; end the attempt at any other
	PromptsYes    = "yes"    // answer yes to every yes/no question, whatever its default; end the attempt at any other
	PromptsKill   = "kill"   // end the attempt at any question
)

// Budget holds the time limits shared by every call.
type Budget struct {
	Cap   Duration `toml:"cap"`   // one call, all attempts together
	Heal  Duration `toml:"heal"`  // one heal (rebuild, download)
	Grace Duration `toml:"grace"` // between SIGTERM and SIGKILL
}

// A model's connections: how many ranged requests may fetch it at once.
const (
	DefaultConnections = 8
	MaxConnections     = 16
)

// Model is a GGUF file guard keeps present and intact.
type Model struct {
	File     string      `toml:"file"` // local base name under ModelsDir
	Size     int64       `toml:"size"` // exact bytes
	SHA256   string      `toml:"sha256,omitempty"`
	URLs     []string    `toml:"urls,omitempty"` // tried in order; the remote name may differ from File
	Role     string      `toml:"role,omitempty"`
	Budget   ModelBudget `toml:"budget,omitempty"`
	Fallback string      `toml:"fallback,omitempty"` // role or file used after a timeout
	// Connections is how many ranged requests may fetch the file at once
	// (docs/downloads.md, "Downloads in parts"); 0 = 8, 1 = one stream.
	Connections int `toml:"connections,omitzero"`
	// PushTo is a registry tag (oci://HOST/REPO:TAG), also the first of
	// the urls, that a download from the others is pushed to in the
	// background for the rest of the fleet: one sandbox downloads while
	// the others wait on its lease (docs/fleet-lease.md). It needs SHA256.
	PushTo string `toml:"push_to,omitempty"`
}

// ModelBudget is the time a call with this model may take: Base plus the
// requested token count divided by TokensPerSecond.
type ModelBudget struct {
	Base            Duration `toml:"base,omitzero"`
	TokensPerSecond float64  `toml:"tokens_per_second,omitzero"`
}

// Swarm configures `guard ask`.
type Swarm struct {
	LightWords  int                 `toml:"light_words"`        // prompts up to this many words go to SCOUT only
	LightTokens int                 `toml:"light_tokens"`       // the answer length (-n) SCOUT alone gets for a light prompt
	FullTokens  int                 `toml:"full_tokens"`        // the answer length every role (or --role) gets otherwise
	Roles       map[string]string   `toml:"roles,omitempty"`    // swarm role -> model role
	Timeouts    map[string]Duration `toml:"timeouts,omitempty"` // swarm role -> budget
}

// Auth says where a tool's credentials live, so status can tell a person
// what is missing and how to fix it.
type Auth struct {
	Name  string   `toml:"-"` // the key under [auth]
	Files []string `toml:"files,omitempty"`
	Env   string   `toml:"env,omitempty"`
	Hint  string   `toml:"hint,omitempty"`
	// For is what needs the credential ("the ClawHub CLI, to publish ..."):
	// guard itself never does, so status says that only For needs it.
	For string `toml:"for,omitempty"`
}

// Self names where guard's own executable can be fetched when a sandbox
// evicted it and Go is not there to rebuild it: guard install bakes these
// into the restore script the PATH block runs (docs/surviving-eviction.md, "Surviving
// the eviction of guard itself").
type Self struct {
	URLs   []string `toml:"urls,omitempty"`   // tried in order; file:// for a fleet mirror; one ending .tar.gz is a release archive holding guard
	SHA256 string   `toml:"sha256,omitempty"` // required with urls: of the executable (run as is) or of the archive
}

// CacheConf bounds the prompt cache.
type CacheConf struct {
	MaxBytes int64    `toml:"max_bytes"`
	TTL      Duration `toml:"ttl,omitzero"` // 0 = entries never expire
}

// StashConf bounds the stash of builds (docs/stash.md): the newest
// entries are kept within MaxBytes, small enough that the state folder
// survives a 128 MB snapshot cap.
type StashConf struct {
	MaxBytes int64 `toml:"max_bytes"`
	// TrustedKeys are the public keys (NAME:BASE64, ed25519) whose
	// signatures make an entry from a shared source usable: an entry from
	// stash_from is code every machine of a fleet runs (docs/stash.md,
	// "Signed entries").
	TrustedKeys []string `toml:"trusted_keys,omitempty"`
	// SecretKey is the file of the key that signs what `guard stash
	// export` writes; "" = ~/.config/guard/stash.sec when it exists.
	SecretKey string `toml:"secret_key,omitempty"`
	// Lease is the period of a fleet's build lease (docs/fleet-lease.md):
	// its holder renews it every third of it; a lease not renewed for it
	// is taken over.
	Lease Duration `toml:"lease,omitzero"`
}

// RegistryConf is how guard speaks to OCI registries (docs/registry.md).
type RegistryConf struct {
	// PlainHTTP are the registries (HOST[:PORT]) spoken to over plain
	// http: a registry on the fleet's own network without TLS. Every
	// other is https.
	PlainHTTP []string `toml:"plain_http,omitempty"`
}

// Tool returns the tool named name, or nil.
func (m *Manifest) Tool(name string) *Tool {
	if x := m.idx; x != nil {
		return lookup(x, x.tools, "t:", name, decodeTool, func(w *Manifest) *Tool { return w.Tools[name] })
	}
	return m.Tools[name]
}

// Build returns the build recipe named name, or nil.
func (m *Manifest) Build(name string) *Build {
	if x := m.idx; x != nil {
		return lookup(x, x.builds, "b:", name, decodeBuild, func(w *Manifest) *Build { return w.Builds[name] })
	}
	return m.Builds[name]
}

// Package returns the Debian package that provides command ("" when the
// manifest's [packages] does not say).
func (m *Manifest) Package(command string) string {
	if x := m.idx; x != nil {
		return lookup(x, x.packages, "p:", command, (*decoder).str, func(w *Manifest) string { return w.Packages[command] })
	}
	return m.Packages[command]
}

// ModelByFile returns the model whose local file name is the base name of
// file, or nil. A path such as "/home/u/x.gguf" matches file "x.gguf".
func (m *Manifest) ModelByFile(file string) *Model {
	return m.model(filepath.Base(file))
}

// model returns the model whose file is exactly file, or nil.
func (m *Manifest) model(file string) *Model {
	if x := m.idx; x != nil {
		return lookup(x, x.models, "m:", file, decodeModel, func(w *Manifest) *Model { return w.model(file) })
	}
	for _, md := range m.Models {
		if md.File == file {
			return md
		}
	}
	return nil
}

// ModelByRole returns the first model with the given role, or nil.
func (m *Manifest) ModelByRole(role string) *Model {
	if role == "" {
		return nil
	}
	if x := m.idx; x != nil {
		file := lookup(x, x.roles, "r:", role, (*decoder).str, func(w *Manifest) string {
			if md := w.ModelByRole(role); md != nil {
				return md.File
			}
			return ""
		})
		if file == "" {
			return nil
		}
		return m.model(file)
	}
	for _, md := range m.Models {
		if md.Role == role {
			return md
		}
	}
	return nil
}

// ModelsPath returns where the model file lives on disk.
func (m *Manifest) ModelsPath(file string) string {
	return filepath.Join(m.ModelsDir, file)
}

// FallbackModel returns the model used after md times out: Fallback names a
// role first, then a file. It returns nil when there is none.
func (m *Manifest) FallbackModel(md *Model) *Model {
	if md == nil || md.Fallback == "" {
		return nil
	}
	if f := m.ModelByRole(md.Fallback); f != nil {
		return f
	}
	return m.model(md.Fallback)
}

//go:embed default.toml
var defaultTOML []byte

// DefaultTOML returns the text of the embedded default manifest. The caller
// may modify the returned slice.
func DefaultTOML() []byte {
	return append([]byte(nil), defaultTOML...)
}

// defaultHeader is how default.toml begins: it tells a reader of the
// embedded default (`guard manifest show`) where a copy to edit goes.
const defaultHeader = "# guard's default manifest. Copy it to ~/.config/guard/manifest.toml (or\n" +
	"# point GUARD_MANIFEST at a copy) to change it; `guard manifest check` validates.\n"

// installedHeader replaces defaultHeader in the copy guard install writes,
// which is already that copy.
const installedHeader = "# guard's manifest, written by guard install from its embedded default.\n" +
	"# Edit it here to change what guard does; `guard manifest check` validates.\n"

// InstalledTOML returns the text guard install writes as the user's
// manifest: the embedded default under a header that says it is the file
// to edit. The caller may modify the returned slice.
func InstalledTOML() []byte {
	body, _ := bytes.CutPrefix(defaultTOML, []byte(defaultHeader))
	return append([]byte(installedHeader), body...)
}
