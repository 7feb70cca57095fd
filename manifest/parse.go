package manifest

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"

	"github.com/sandbox-guard/guard/guard/state"
)

// Defaults for keys the manifest leaves out (or sets to zero).
const (
	DefaultLog        = "/tmp/selfheal.log"
	DefaultShimDir    = "~/.shim"
	DefaultModelsDir  = "~"
	DefaultStateDir   = "~/.cache/guard"
	DefaultCap        = Duration(300 * time.Second)
	DefaultHeal       = Duration(30 * time.Minute)
	DefaultGrace      = Duration(3 * time.Second)
	DefaultLightWords = 8
	// A light prompt's answer: the original tool's rule is SCOUT alone,
	// 80 to 120 tokens; a full one, every role, is longer.
	DefaultLightTokens = 100
	DefaultFullTokens  = 256
	DefaultCacheBytes  = 256 << 20
	DefaultStashBytes  = 64 << 20
	DefaultLease       = Duration(30 * time.Second)
	DefaultOutput      = "build" // a build recipe's output folder, below its dir
	// DefaultModelBase is the base of a [[models]] entry whose budget
	// gives none (`guard model push` prints no budget): the time to load
	// a model and read the prompt, the default models' own. A budget of
	// n / tokens_per_second alone ends a short answer before the model is
	// loaded. With no rate either, the cap holds until this machine's
	// speed is measured.
	DefaultModelBase = Duration(30 * time.Second)

	// MaxBytes bounds a manifest file: far more than any fleet's (10,000
	// tools is under 1 MiB), and a /dev/zero or a runaway generator is an
	// error instead of all the memory there is.
	MaxBytes = 4 << 20
)

// UserPath returns where the user's manifest lives when nothing names
// another: home/.config/guard/manifest.toml.
func UserPath(home string) string {
	return filepath.Join(home, ".config", "guard", "manifest.toml")
}

// Load reads and parses the manifest at path. With path "" it reads
// UserPath(home) and, when that file does not exist, the embedded default;
// a path that names a missing file (GUARD_MANIFEST, a FILE argument) is an
// error, because the user asked for that file. Only a regular file of at
// most MaxBytes is read (a link to one is fine: a dotfiles manifest); a
// FIFO or a device is an error, never a hang.
func Load(path, home string) (*Manifest, error) {
	explicit := path != ""
	if path == "" {
		path = UserPath(home)
	}
	data, err := ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return Parse(EmbeddedSource, defaultTOML, home)
		}
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return Parse(path, data, home)
}

// ReadFile reads the manifest file at path the way every reader of it
// must: a regular file (a link to one is fine) of at most MaxBytes, never
// a FIFO or a device.
func ReadFile(path string) ([]byte, error) {
	return state.ReadRegular(path, MaxBytes, false)
}

// Parse decodes a manifest read from source (a file name for messages),
// applies defaults, validates it and expands "~/" in paths with home. Every
// error is an *Error, or several joined with errors.Join.
func Parse(source string, data []byte, home string) (*Manifest, error) {
	var tree map[string]any
	if err := toml.Unmarshal(data, &tree); err != nil {
		return nil, decodeError(source, err)
	}
	m := new(Manifest)
	c := checker{file: source, data: data}
	if err := c.decode(tree, m); err != nil {
		return nil, err
	}
	c.unknownKeys()
	m.Source = source
	m.fill()
	c.check(m)
	if len(c.errs) > 0 {
		return nil, joinErrors(c.errs)
	}
	m.expand(home)
	return m, nil
}

// fill names the map entries after their keys and applies defaults. A
// zero value means "not set": a cap, heal or grace of zero would make every
// call or heal fail at once, which nobody means to write.
func (m *Manifest) fill() {
	m.Log = cmp.Or(m.Log, DefaultLog)
	m.ShimDir = cmp.Or(m.ShimDir, DefaultShimDir)
	m.ModelsDir = cmp.Or(m.ModelsDir, DefaultModelsDir)
	m.StateDir = cmp.Or(m.StateDir, DefaultStateDir)
	m.Budget.Cap = cmp.Or(m.Budget.Cap, DefaultCap)
	m.Budget.Heal = cmp.Or(m.Budget.Heal, DefaultHeal)
	m.Budget.Grace = cmp.Or(m.Budget.Grace, DefaultGrace)
	m.Swarm.LightWords = cmp.Or(m.Swarm.LightWords, DefaultLightWords)
	m.Swarm.LightTokens = cmp.Or(m.Swarm.LightTokens, DefaultLightTokens)
	m.Swarm.FullTokens = cmp.Or(m.Swarm.FullTokens, DefaultFullTokens)
	m.Cache.MaxBytes = cmp.Or(m.Cache.MaxBytes, DefaultCacheBytes)
	m.Stash.MaxBytes = cmp.Or(m.Stash.MaxBytes, DefaultStashBytes)
	m.Stash.Lease = cmp.Or(m.Stash.Lease, DefaultLease)
	heal := m.Budget.Heal
	if heal < 0 { // reported under budget.heal; do not repeat it for each build
		heal = DefaultHeal
	}
	for name, b := range m.Builds {
		if b == nil {
			b = new(Build)
			m.Builds[name] = b
		}
		b.Name = name
		b.Timeout = cmp.Or(b.Timeout, heal)
		if b.Outputs == nil {
			b.Outputs = []string{DefaultOutput}
		}
	}
	for name, t := range m.Tools {
		if t == nil {
			t = new(Tool)
			m.Tools[name] = t
		}
		t.Name = name
	}
	m.fillTargets()
	for name, a := range m.Auth {
		if a == nil {
			a = new(Auth)
			m.Auth[name] = a
		}
		a.Name = name
	}
	for i, md := range m.Models {
		if md == nil {
			md = new(Model)
			m.Models[i] = md
		}
		md.Budget.Base = cmp.Or(md.Budget.Base, DefaultModelBase)
	}
}

// expand replaces a leading "~" in every path with home. With home ""
// paths are left as written.
func (m *Manifest) expand(home string) {
	if home == "" {
		return
	}
	x := func(p string) string { return ExpandHome(p, home) }
	m.Log = x(m.Log)
	m.ShimDir = x(m.ShimDir)
	m.ModelsDir = x(m.ModelsDir)
	m.StateDir = x(m.StateDir)
	m.Stash.SecretKey = x(m.Stash.SecretKey)
	for _, b := range m.Builds {
		b.Dir = x(b.Dir)
	}
	for _, t := range m.Tools {
		t.Path = x(t.Path)
	}
	for _, a := range m.Auth {
		for i, f := range a.Files {
			a.Files[i] = x(f)
		}
	}
}

// ExpandHome replaces a leading "~" in p with home: "~" is home, "~/x" is
// x below home, anything else is p. It is the one reading of "~" in guard,
// for the manifest's paths and for paths from the environment alike. With
// home "" a path under "~/" has no answer and becomes "", so a caller
// never takes it for a path in the current folder.
func ExpandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home == "" {
			return ""
		}
		return filepath.Join(home, rest)
	}
	return p
}

// decodeError turns the TOML library's error into an *Error: a syntax
// error, a duplicated key or table, a number out of range, with its line.
func decodeError(file string, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		return &Error{File: file, Line: line, Msg: tidy(strings.TrimPrefix(de.Error(), "toml: "))}
	}
	return &Error{File: file, Msg: tidy(strings.TrimPrefix(err.Error(), "toml: "))}
}

// tidy makes a library message follow guard's rule: lower case start, no
// trailing period.
func tidy(msg string) string {
	msg = strings.TrimSuffix(strings.TrimSpace(msg), ".")
	r, n := utf8.DecodeRuneInString(msg)
	if n > 0 && unicode.IsUpper(r) {
		if r2, _ := utf8.DecodeRuneInString(msg[n:]); !unicode.IsUpper(r2) {
			msg = string(unicode.ToLower(r)) + msg[n:]
		}
	}
	return msg
}
