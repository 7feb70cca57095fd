package manifest

import (
	"time"

	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/sandbox-guard/guard/guard/sign"
)

// checker collects every validation error of one manifest. The key index
// that gives errors their lines is built on the first error only.
type checker struct {
	file    string
	data    []byte
	idx     *keyIndex
	errs    []*Error
	unknown []tomlKey // keys the manifest does not have, in document order
}

func (c *checker) index() *keyIndex {
	if c.idx == nil {
		c.idx = indexKeys(c.data)
	}
	return c.idx
}

func (c *checker) errorf(p keyPath, format string, args ...any) {
	c.errs = append(c.errs, &Error{
		File: c.file,
		Line: c.index().lineOf(p),
		Msg:  p.String() + ": " + fmt.Sprintf(format, args...),
	})
}

// path builds a key path of names; callers build paths only on the error
// branch, so a healthy manifest costs no allocations here.
func path(names ...string) keyPath {
	p := make(keyPath, 0, len(names)+1)
	for _, n := range names {
		p = p.key(n)
	}
	return p
}

func modelPath(i int, names ...string) keyPath {
	p := path("models").index(i)
	for _, n := range names {
		p = p.key(n)
	}
	return p
}

// The llama tools, whose calls plan their own attempts (package shims; the
// manifest does not import it).
const (
	llamaCompletion = "llama-completion"
	llamaSimple     = "llama-simple"
)

func isLlamaTool(name string) bool { return name == llamaCompletion || name == llamaSimple }

// unknownKeys reports keys that match no field: usually a typo that would
// otherwise be silently ignored. Keys under an unknown table were not
// collected (decode).
func (c *checker) unknownKeys() {
	seen := make(map[string]int)
	for _, k := range c.unknown {
		ks := k.String()
		n := seen[ks]
		seen[ks] = n + 1
		msg := "unknown key " + ks
		if s := suggest(k); s != "" {
			msg += " (did you mean " + s + "?)"
		}
		c.errs = append(c.errs, &Error{File: c.file, Line: c.index().nthLine(k, n), Msg: msg})
	}
}

func (c *checker) check(m *Manifest) {
	if !isPathSetting(m.Log) {
		c.pathError(path("log"), m.Log)
	}
	if !isPathSetting(m.ShimDir) {
		c.pathError(path("shim_dir"), m.ShimDir)
	}
	if !isPathSetting(m.ModelsDir) {
		c.pathError(path("models_dir"), m.ModelsDir)
	}
	if !isPathSetting(m.StateDir) {
		c.pathError(path("state_dir"), m.StateDir)
	}
	for cmd, pkg := range m.Packages {
		if !isDebianPackage(pkg) {
			c.errorf(path("packages", cmd), "%q is not a Debian package name (lower case letters, digits, +, - and .)", pkg)
		}
	}
	for _, b := range m.Builds {
		c.build(b)
	}
	for _, t := range m.Tools {
		c.tool(m, t)
	}
	if m.Budget.Cap < 0 {
		c.durationError(path("budget", "cap"), m.Budget.Cap)
	}
	if m.Budget.Heal < 0 {
		c.durationError(path("budget", "heal"), m.Budget.Heal)
	}
	if m.Budget.Grace < 0 {
		c.durationError(path("budget", "grace"), m.Budget.Grace)
	}
	for i := range m.Models {
		c.model(m, i)
	}
	c.swarm(m)
	for _, a := range m.Auth {
		for i, f := range a.Files {
			if !isPathSetting(f) {
				c.pathError(path("auth", a.Name, "files").index(i), f)
			}
		}
		if a.Env != "" && !isEnvName(a.Env) {
			c.errorf(path("auth", a.Name, "env"), "%q is not an environment variable name", a.Env)
		}
	}
	if m.Cache.MaxBytes < 0 {
		c.errorf(path("cache", "max_bytes"), "must not be negative")
	}
	if m.Cache.TTL < 0 {
		c.durationError(path("cache", "ttl"), m.Cache.TTL)
	}
	if m.Stash.MaxBytes < 0 {
		c.errorf(path("stash", "max_bytes"), "must not be negative")
	}
	switch l := m.Stash.Lease; {
	case l < 0:
		c.durationError(path("stash", "lease"), l)
	case l > 0 && (l < Duration(time.Second) || l > Duration(10*time.Minute)):
		// lease.MinPeriod and lease.MaxPeriod: a renewal every third of
		// a shorter one would outrun a registry's answers; a longer one
		// holds a fleet that long after its builder died.
		c.errorf(path("stash", "lease"), "%s: a lease is between 1s and 10m", l)
	}
	for i, h := range m.Registry.PlainHTTP {
		if h == "" || strings.ContainsAny(h, "/@ ") {
			c.errorf(path("registry", "plain_http").index(i), "%q: want a registry's HOST[:PORT], such as \"registry.lan:5000\"", h)
		}
	}
	for i, k := range m.Stash.TrustedKeys {
		if _, err := sign.ParsePublic(k); err != nil {
			c.errorf(path("stash", "trusted_keys").index(i), "%v (guard stash keygen prints one)", err)
		}
	}
	if m.Self != nil {
		c.self(m.Self)
	}
}

// self checks [self]: a fetched guard is executed at shell start without
// any other check, so its sha256 is not optional the way a model's is.
func (c *checker) self(s *Self) {
	for k, u := range s.URLs {
		if why := CheckURL(u); why != "" {
			c.errorf(path("self", "urls").index(k), "%s", why)
		}
	}
	switch {
	case s.SHA256 == "" && len(s.URLs) > 0:
		c.errorf(path("self", "urls"), "needs sha256: the sha256 of the guard executable the URLs serve (sha256sum bin/guard), or of the release archive when they end .tar.gz")
	case s.SHA256 != "" && !IsSHA256(s.SHA256):
		c.errorf(path("self", "sha256"), "must be 64 hex characters: the sha256 of the guard executable the URLs serve, or of the release archive when they end .tar.gz")
	default:
		s.SHA256 = strings.ToLower(s.SHA256)
	}
}

func (c *checker) build(b *Build) {
	if b.Dir == "" {
		c.errorf(path("builds", b.Name, "dir"), "missing: say where the build runs, such as \"~/llama.cpp\"")
	} else {
		if !isPathSetting(b.Dir) {
			c.pathError(path("builds", b.Name, "dir"), b.Dir)
		}
	}
	if b.Repo != "" {
		if why := CheckURL(b.Repo); why != "" {
			c.errorf(path("builds", b.Name, "repo"), "%s", why)
		}
	}
	for i, n := range b.Needs {
		if n == "" {
			c.errorf(path("builds", b.Name, "needs").index(i), "empty command name")
		}
	}
	if len(b.Steps) == 0 {
		c.errorf(path("builds", b.Name, "steps"), "missing: a build needs at least one step")
	}
	for i, step := range b.Steps {
		switch {
		case len(step) == 0:
			c.errorf(path("builds", b.Name, "steps").index(i), "empty step")
		case step[0] == "":
			c.errorf(path("builds", b.Name, "steps").index(i), "empty program name")
		}
		for j, arg := range step {
			if why := placeholderError(arg, b.Targets, b.Name); why != "" {
				c.errorf(path("builds", b.Name, "steps").index(i).index(j), "%s", why)
			}
		}
	}
	for i, t := range b.Targets {
		if t == "" || strings.HasPrefix(t, "-") {
			c.errorf(path("builds", b.Name, "targets").index(i), "%q is not a target name", t)
		}
	}
	if b.Timeout < 0 {
		c.durationError(path("builds", b.Name, "timeout"), b.Timeout)
	}
	for i, src := range b.StashFrom {
		why := CheckURL(src)
		if strings.HasPrefix(src, "oci://") {
			why = checkRegistry(src)
		}
		if why != "" {
			c.errorf(path("builds", b.Name, "stash_from").index(i), "%s", why)
		}
	}
	if b.StashTo != "" {
		if why := checkRegistry(b.StashTo); why != "" {
			c.errorf(path("builds", b.Name, "stash_to"), "%s", why)
		}
	}
	if p := b.Prebuilt; p != nil {
		if owner, repo, ok := strings.Cut(p.GitHub, "/"); !ok || owner == "" || repo == "" || strings.ContainsAny(repo, "/ ?#") {
			c.errorf(path("builds", b.Name, "prebuilt", "github"), "%q is not OWNER/REPO, such as \"ggml-org/llama.cpp\"", p.GitHub)
		}
		if !strings.Contains(p.Asset, "{tag}") || strings.ContainsAny(p.Asset, "/?#") {
			c.errorf(path("builds", b.Name, "prebuilt", "asset"), "%q must be an asset's file name with {tag} in it, such as \"llama-{tag}-bin-ubuntu-{arch}.tar.gz\"", p.Asset)
		}
		if p.SHA256 != "" && !IsSHA256(p.SHA256) {
			c.errorf(path("builds", b.Name, "prebuilt", "sha256"), "must be 64 hex characters: the sha256 of the asset")
		}
	}
	for i, out := range b.Outputs {
		if !IsOutputFolder(out) {
			c.errorf(path("builds", b.Name, "outputs").index(i), "%q must be a folder below dir, such as \"build\": a scrub after an interrupted build removes files only there", out)
		}
	}
}

// IsOutputFolder reports whether out names a folder below a build's dir: a
// relative path that is not dir itself and does not climb out of it.
func IsOutputFolder(out string) bool {
	rel := filepath.Clean(out)
	return out != "" && !filepath.IsAbs(rel) && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") && !strings.Contains(out, "\x00")
}

func (c *checker) tool(m *Manifest, t *Tool) {
	switch {
	case t.Name == "guard":
		// Called by this name guard runs as its own command line
		// (cmd/guard/main.go), never as a tool's shim.
		c.errorf(path("tools", t.Name), "guard cannot shim itself: called as guard it runs its own commands, never a tool; name the tool otherwise")
	case !isPlainName(t.Name):
		c.errorf(path("tools", t.Name), "a tool name must be a plain file name: it names the link in the shim dir")
	}
	if t.Path != "" {
		if !isPathSetting(t.Path) {
			c.pathError(path("tools", t.Name, "path"), t.Path)
		}
	}
	if t.Build != "" && m.Builds[t.Build] == nil {
		c.errorf(path("tools", t.Name, "build"), "no [builds.%s] in the manifest", tomlKey{t.Build})
	}
	if t.Package != "" && !isDebianPackage(t.Package) {
		c.errorf(path("tools", t.Name, "package"), "%q is not a Debian package name (lower case letters, digits, +, - and .)", t.Package)
	}
	for i, f := range t.Fallback {
		switch {
		case f == t.Name:
			c.errorf(path("tools", t.Name, "fallback").index(i), "a tool cannot fall back to itself")
		case m.Tools[f] == nil:
			c.errorf(path("tools", t.Name, "fallback").index(i), "no tool %q in the manifest", f)
		case isLlamaTool(t.Name) && (t.Name != llamaCompletion || f != llamaSimple):
			// A llama call plans its own attempts; anything else would be
			// accepted here and never run.
			c.errorf(path("tools", t.Name, "fallback").index(i), "a llama tool's fallbacks are its plan's: llama-simple after a failure (llama-completion only) and the model's fallback after a timeout")
		}
	}
	if t.Timeout < 0 {
		c.durationError(path("tools", t.Name, "timeout"), t.Timeout)
	}
	if t.Stall < 0 {
		c.durationError(path("tools", t.Name, "stall"), t.Stall)
	}
	switch t.Prompts {
	case "", PromptsAnswer, PromptsYes, PromptsKill:
	default:
		c.errorf(path("tools", t.Name, "prompts"), "%q is not a prompt policy: use \"answer\", \"yes\", \"kill\" or leave it empty", t.Prompts)
	}
	for k := range t.Env {
		if !isEnvName(k) {
			c.errorf(path("tools", t.Name, "env", k), "%q is not an environment variable name", k)
		}
	}
}

func (c *checker) model(m *Manifest, i int) {
	md := m.Models[i]
	switch {
	case md.File == "":
		c.errorf(modelPath(i, "file"), "missing: the model's local file name")
	case !isPlainName(md.File):
		c.errorf(modelPath(i, "file"), "%q must be a plain file name, not a path", md.File)
	}
	for j := range i {
		other := m.Models[j]
		if md.File != "" && other.File == md.File {
			c.errorf(modelPath(i, "file"), "%q is already models[%d]", md.File, j)
		}
		if md.Role != "" && other.Role == md.Role {
			c.errorf(modelPath(i, "role"), "role %q is already models[%d]'s", md.Role, j)
		}
	}
	if md.Size <= 0 {
		c.errorf(modelPath(i, "size"), "must be the file's exact size in bytes, greater than zero")
	}
	if md.SHA256 != "" {
		if !IsSHA256(md.SHA256) {
			c.errorf(modelPath(i, "sha256"), "must be 64 hex characters, or empty until `guard manifest pin` fills it")
		} else {
			md.SHA256 = strings.ToLower(md.SHA256)
		}
	}
	for k, u := range md.URLs {
		why := CheckURL(u)
		if strings.HasPrefix(u, "oci://") {
			why = checkModelRegistry(u, md.SHA256)
		}
		if why != "" {
			c.errorf(modelPath(i, "urls").index(k), "%s", why)
		}
	}
	if md.PushTo != "" {
		if !strings.HasPrefix(md.PushTo, "oci://") {
			c.errorf(modelPath(i, "push_to"), "%q is not a registry: want oci://HOST[:PORT]/REPO:TAG", md.PushTo)
		} else if why := checkModelRegistry(md.PushTo, md.SHA256); why != "" {
			c.errorf(modelPath(i, "push_to"), "%s", why)
		} else if strings.Contains(md.PushTo, "@") || !strings.Contains(md.PushTo[strings.LastIndex(md.PushTo, "/"):], ":") {
			c.errorf(modelPath(i, "push_to"), "%q: push to a tag, oci://HOST[:PORT]/REPO:TAG (the digest is the file's)", md.PushTo)
		} else if len(md.URLs) == 0 || md.URLs[0] != md.PushTo {
			// A download tries the urls in order: the fleet takes the
			// model from the registry only when it comes first.
			c.errorf(modelPath(i, "push_to"), "%q must also be the first of urls, where the rest of the fleet takes the model from", md.PushTo)
		} else if md.SHA256 == "" {
			// What one sandbox pushes, every other runs: the pin, not
			// the registry's word, says it is the model.
			c.errorf(modelPath(i, "push_to"), "needs the model's sha256 (guard manifest pin fills it)")
		}
	}
	if md.Connections < 0 || md.Connections > MaxConnections {
		c.errorf(modelPath(i, "connections"), "must be from 1 to %d (or 0 for the default, %d)", MaxConnections, DefaultConnections)
	}
	if md.Budget.Base < 0 {
		c.durationError(modelPath(i, "budget", "base"), md.Budget.Base)
	}
	if tps := md.Budget.TokensPerSecond; tps < 0 || math.IsNaN(tps) || math.IsInf(tps, 0) {
		c.errorf(modelPath(i, "budget", "tokens_per_second"), "must be a positive number, or 0 for no per-token time")
	}
	if md.Fallback != "" {
		switch f := m.FallbackModel(md); {
		case f == nil:
			c.errorf(modelPath(i, "fallback"), "no model with role or file %q", md.Fallback)
		case f == md:
			c.errorf(modelPath(i, "fallback"), "a model cannot fall back to itself")
		}
	}
}

func (c *checker) swarm(m *Manifest) {
	s := &m.Swarm
	if s.LightWords < 0 {
		c.errorf(path("swarm", "light_words"), "must not be negative")
	}
	if s.LightTokens < 0 {
		c.errorf(path("swarm", "light_tokens"), "must be a positive number of tokens")
	}
	if s.FullTokens < 0 {
		c.errorf(path("swarm", "full_tokens"), "must be a positive number of tokens")
	}
	for name, role := range s.Roles {
		if m.ModelByRole(role) == nil {
			c.errorf(path("swarm", "roles", name), "no model with role %q", role)
		}
	}
	for name, d := range s.Timeouts {
		if _, ok := s.Roles[name]; !ok {
			c.errorf(path("swarm", "timeouts", name), "no swarm role %s in swarm.roles", tomlKey{name})
		}
		if d < 0 {
			c.durationError(path("swarm", "timeouts", name), d)
		}
	}
}

// durationError reports a negative d, or one that did not parse.
func (c *checker) durationError(p keyPath, d Duration) {
	switch {
	case d == badDuration:
		raw := c.index().raw(p)
		if raw == "" {
			raw = "the value"
		}
		c.errorf(p, "%s is not a duration: write a number with a unit, such as \"45s\" or \"2m\"", raw)
	default:
		c.errorf(p, "%s: a duration must not be negative", d)
	}
}

// isPathSetting requires an absolute path or one under "~/": a relative
// path would depend on whatever folder the calling script happens to run in.
func isPathSetting(v string) bool {
	return v == "~" || strings.HasPrefix(v, "~/") || filepath.IsAbs(v)
}

func (c *checker) pathError(p keyPath, v string) {
	c.errorf(p, "%q must be an absolute path or start with ~/", v)
}

// checkRegistry checks a stash registry, oci://HOST[:PORT]/REPO (a tag
// is the stash's to choose); the registry client checks the names
// further when it opens one.
func checkRegistry(raw string) string {
	rest, _ := strings.CutPrefix(raw, "oci://")
	host, repo, ok := strings.Cut(rest, "/")
	switch {
	case !strings.HasPrefix(raw, "oci://"):
		return fmt.Sprintf("%q is not a registry: want oci://HOST[:PORT]/REPO", raw)
	case !ok || host == "" || repo == "" || strings.ContainsAny(rest, "@ ") || strings.Contains(repo, ":"):
		return fmt.Sprintf("%q: want oci://HOST[:PORT]/REPO, with no tag (the stash tags each entry by its key)", raw)
	}
	return ""
}

// checkModelRegistry checks a model's registry url,
// oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]: a digest is the model's sha256,
// so it must be the pin when there is one.
func checkModelRegistry(raw, pin string) string {
	rest, _ := strings.CutPrefix(raw, "oci://")
	host, repo, ok := strings.Cut(rest, "/")
	if !ok || host == "" || repo == "" || strings.ContainsAny(rest, " ") {
		return fmt.Sprintf("%q: want oci://HOST[:PORT]/REPO[:TAG] or oci://HOST/REPO@sha256:HEX", raw)
	}
	if _, d, ok := strings.Cut(repo, "@"); ok {
		hexd, ok := strings.CutPrefix(d, "sha256:")
		if !ok || len(hexd) != 64 || strings.Trim(hexd, "0123456789abcdef") != "" {
			return fmt.Sprintf("%q: the digest after @ must be sha256: and 64 hex digits", raw)
		}
		if pin != "" && !strings.EqualFold(pin, hexd) {
			return fmt.Sprintf("%q names sha256 %s, but the model's sha256 is %s: the registry's digest is the model's sha256", raw, hexd, pin)
		}
	}
	return ""
}

// CheckURL says why a download or clone URL is not allowed, or returns ""
// (also for the release archive guard install records).
// Plain http is allowed only to loopback, where nothing on the network can
// swap the bytes; sha256 pins are optional, so https is the real guard.
func CheckURL(raw string) string {
	if raw == "" {
		return "empty URL"
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("%q is not a URL: %v", raw, err)
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" {
			return fmt.Sprintf("%q has no host", raw)
		}
	case "http":
		if !IsLoopback(u.Hostname()) {
			return fmt.Sprintf("%q uses plain http, which is allowed only for loopback hosts (127.0.0.0/8, localhost, [::1]): use https", raw)
		}
	case "file":
		if u.Host != "" && !strings.EqualFold(u.Host, "localhost") {
			return fmt.Sprintf("%q names a remote host: a file URL must be local, such as file:///srv/models/x.gguf", raw)
		}
		if !strings.HasPrefix(u.Path, "/") {
			return fmt.Sprintf("%q must be an absolute file URL, such as file:///srv/models/x.gguf", raw)
		}
	case "":
		return fmt.Sprintf("%q has no scheme: use an https:// URL", raw)
	default:
		return fmt.Sprintf("%q uses %s: only https (http for loopback, and file) is allowed", raw, u.Scheme)
	}
	return ""
}

// IsLoopback reports whether host names this machine: localhost in any
// case, or a loopback address (an IPv4 one mapped into IPv6 included).
// It is the one rule for plain http: the manifest admits an http url by
// it, and a download follows a plain-http redirect only between hosts it
// admits.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func isPlainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// isDebianPackage follows Debian policy 5.6.1: at least two characters,
// lower case letters, digits, +, - and ., starting with a letter or digit.
// It also keeps a value that starts with "-" from reaching apt-get as an
// option.
func isDebianPackage(s string) bool {
	if len(s) < 2 || !isLowerAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func isEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// IsSHA256 reports whether s is a sha256 in hex: 64 hex digits, either case.
func IsSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// suggest returns the known key closest to the unknown last part of k, or
// "" when none is close enough to be a likely typo.
func suggest(k tomlKey) string {
	best, bestDist := "", 3
	for _, known := range knownKeys(k[:len(k)-1]) {
		if d := editDistance(k[len(k)-1], known); d < bestDist {
			best, bestDist = known, d
		}
	}
	return best
}

// knownKeys lists the TOML keys of the table at parent, read from the
// struct tags, or nil when parent is not a struct-backed table.
func knownKeys(parent tomlKey) []string {
	t := reflect.TypeFor[Manifest]()
	for _, name := range parent {
		t = elemType(t)
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem() // name is a map key: any value is fine
		case reflect.Struct:
			f, ok := fieldByKey(t, name)
			if !ok {
				return nil
			}
			t = f.Type
		default:
			return nil
		}
	}
	t = elemType(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		if k := tomlName(t.Field(i)); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

func elemType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); tomlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// editDistance is the Levenshtein distance between two short keys.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
