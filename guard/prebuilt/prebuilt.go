// Package prebuilt answers a build's first calls with the project's own
// verified release build while the native build is made (docs/prebuilt.md).
//
// It exists for the case every fleet and every solo sandbox meets first:
// nothing cached anywhere, and a cold build of minutes during which every
// call would say 75. A project such as llama.cpp publishes a portable
// build of every commit of its main branch as a GitHub release; this
// package finds the release that is exactly the checkout (Clean, Tags),
// asks GitHub's releases API once per tag and machine (Client), downloads
// the asset for this CPU's architecture with guard's fetch, checked
// against the sha256 the API declares (or the manifest pins), unpacks it
// into guard's state folder refusing anything that leaves it, finds the
// tools by name, and runs each once before a call uses it. It never
// touches the checkout or its outputs; the engine decides when to use it.
package prebuilt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/progress"
	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// Arch is GOARCH as llama.cpp names it in its assets: x64 or arm64; ok is
// false for an architecture it publishes no Linux build for.
func Arch(goarch string) (string, bool) {
	switch goarch {
	case "amd64":
		return "x64", true
	case "arm64":
		return "arm64", true
	}
	return "", false
}

// AssetName is the asset template with {tag} and {arch} filled.
func AssetName(template, tag, arch string) string {
	return strings.NewReplacer("{tag}", tag, "{arch}", arch).Replace(template)
}

// Root is the prebuilt builds' folder in the state folder.
func Root(stateDir string) string { return filepath.Join(stateDir, "prebuilt") }

// APIDir is where the releases API's answers are kept.
func APIDir(stateDir string) string { return filepath.Join(Root(stateDir), "api") }

// Request is one prebuilt wanted.
type Request struct {
	Recipe   string             // the build recipe's name
	Source   *manifest.Prebuilt // its [builds.NAME.prebuilt] table
	Commit   string             // the checkout's HEAD, clean as Clean says
	Dir      string             // the checkout
	Tools    []string           // the file names of the tools the recipe makes
	PathEnv  string             // finds git
	Env      []string           // the environment of the health runs
	StateDir string
	Client   *Client
	GOARCH   string // "" = this machine's

	Progress io.Writer     // the download's progress lines; nil = none
	Pace     progress.Pace // their interval off a terminal, or their observer
}

// Ready is a prebuilt unpacked and checked, ready for calls.
type Ready struct {
	Tag   string            `json:"tag"`
	Asset string            `json:"asset"`
	Dir   string            `json:"-"`
	Tools map[string]string `json:"tools"` // file name → path inside Dir (absolute once ready)
	// Searched are the tool names the archive was searched for: a tool
	// in neither map was not asked then (a tool the manifest gained
	// since, or a record of an older guard), so the archive is searched
	// again for it.
	Searched []string `json:"searched,omitempty"`
	// Kept reports a prebuilt that was ready before this call: nothing
	// was asked or downloaded.
	Kept bool `json:"-"`
}

// Tool is the path of the prebuilt's tool name, or false when the release
// does not make it (that tool's calls build it natively).
func (r Ready) Tool(name string) (string, bool) {
	p, ok := r.Tools[name]
	return p, ok
}

// failedLife is how long a prebuilt that failed its download, unpack or
// check is not tried again for the same commit (the native build goes on).
const failedLife = time.Hour

func (r Request) arch() (string, bool) {
	if r.GOARCH != "" {
		return Arch(r.GOARCH)
	}
	return Arch(runtime.GOARCH)
}

// folder is where the prebuilt of commit for arch is unpacked.
func folder(stateDir, recipe, commit, arch string) string {
	return filepath.Join(Root(stateDir), recipe, commit+"-"+arch)
}

// Look is the prebuilt of the recipe at commit, when one is ready: no
// git run, no request, only its record and its tools' files (each of
// tools it holds must still be executable; one it does not make is left
// out, for Tool to say).
func Look(stateDir, recipe, commit, goarch string, tools []string) (Ready, bool) {
	arch, ok := Arch(goarch)
	if !ok || commit == "" {
		return Ready{}, false
	}
	dir := folder(stateDir, recipe, commit, arch)
	data, err := state.ReadRegular(dir+".ready", 1<<20, true)
	if err != nil {
		return Ready{}, false
	}
	var r Ready
	if json.Unmarshal(data, &r) != nil {
		return Ready{}, false
	}
	r.Dir, r.Kept = dir, true
	for _, t := range tools {
		rel, ok := r.Tools[t]
		switch {
		case !ok && !slices.Contains(r.Searched, t):
			return Ready{}, false // never looked for: search the archive again
		case ok && !isExecutable(filepath.Join(dir, rel)):
			return Ready{}, false
		}
	}
	for name, rel := range r.Tools {
		r.Tools[name] = filepath.Join(dir, rel)
	}
	return r, true
}

// Prepare makes the prebuilt of r ready, or says in one line why there is
// none: no build for this architecture, no release names the commit, the
// release has no asset for this machine, the asset declares no sha256 and
// the manifest pins none, the download or its check failed, the archive
// leaves its folder, a tool is missing or does not start.
func Prepare(ctx context.Context, r Request) (Ready, error) {
	arch, ok := r.arch()
	if !ok {
		return Ready{}, fmt.Errorf("the releases have no build for this machine's architecture (%s)", runtime.GOARCH)
	}
	goarch := r.GOARCH
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	if ready, ok := Look(r.StateDir, r.Recipe, r.Commit, goarch, r.Tools); ok {
		return ready, nil
	}
	dir := folder(r.StateDir, r.Recipe, r.Commit, arch)
	if why, ok := failedBefore(dir); ok {
		return Ready{}, errors.New(why)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return Ready{}, err
	}
	held, err := lock.Acquire(ctx, dir+".lock", nil)
	if err != nil {
		return Ready{}, err
	}
	defer held.Release()
	if ready, ok := Look(r.StateDir, r.Recipe, r.Commit, goarch, r.Tools); ok {
		return ready, nil
	}
	rel, err := r.release(ctx)
	if err != nil {
		return Ready{}, err
	}
	name := AssetName(r.Source.Asset, rel.Tag, arch)
	asset, ok := rel.Asset(name)
	if !ok {
		return Ready{}, fmt.Errorf("the release %s has no asset %s for this machine", rel.Tag, name)
	}
	sum, pin := asset.SHA256(), strings.ToLower(r.Source.SHA256)
	switch {
	case sum == "" && pin == "":
		return Ready{}, fmt.Errorf("the release %s declares no sha256 of %s and the manifest pins none: refused; pin one with sha256 = \"...\" in [builds.%s.prebuilt]", rel.Tag, name, r.Recipe)
	case sum != "" && pin != "" && sum != pin:
		return Ready{}, fmt.Errorf("the release %s declares sha256 %s for %s, not the manifest's pin %s: refused", rel.Tag, sum[:12], name, pin[:12])
	case pin == "":
		pin = sum
	}
	ready, err := r.install(ctx, dir, rel.Tag, asset, pin)
	if err != nil {
		remember(dir, err)
		return Ready{}, err
	}
	return ready, nil
}

// release asks the API for the tags that may name the commit, in order,
// and is the first release that does: its target_commitish is the commit,
// or, where the project names a branch there, the tag is one of the
// checkout's own.
func (r Request) release(ctx context.Context) (Release, error) {
	tags, counted, err := Tags(ctx, r.Dir, r.PathEnv)
	if err != nil {
		return Release{}, err
	}
	var whys []string
	for _, tag := range tags {
		rel, _, err := r.Client.Release(ctx, r.Source.GitHub, tag)
		switch {
		case errors.Is(err, ErrNoRelease):
			whys = append(whys, "no release "+tag)
			continue
		case err != nil:
			return Release{}, err
		}
		switch {
		case isCommit(rel.Commit) && !strings.EqualFold(rel.Commit, r.Commit):
			whys = append(whys, "the release "+tag+" is of commit "+short(rel.Commit))
		case !isCommit(rel.Commit) && tag == counted:
			whys = append(whys, "the release "+tag+" names no commit to confirm the count by")
		default:
			return rel, nil
		}
	}
	return Release{}, fmt.Errorf("no release of %s is commit %s (%s)", r.Source.GitHub, short(r.Commit), strings.Join(whys, ", "))
}

// install downloads asset, checked against sum, unpacks it beside dir and
// checks its tools, then moves it to dir with its record.
func (r Request) install(ctx context.Context, dir, tag string, asset Asset, sum string) (Ready, error) {
	downloads := filepath.Join(Root(r.StateDir), "downloads")
	if err := os.MkdirAll(downloads, 0o755); err != nil {
		return Ready{}, err
	}
	archive := filepath.Join(downloads, filepath.Base(asset.Name))
	_, err := fetch.Fetch(ctx, fetch.Request{
		URLs: []string{asset.URL}, Dest: archive, Size: asset.Size, SHA256: sum,
		Progress: r.Progress, Pace: r.Pace, Retries: 2,
	})
	var mismatch *fetch.MismatchError
	switch {
	case errors.As(err, &mismatch) && mismatch.What == "sha256":
		from := "the release declares"
		if r.Source.SHA256 != "" {
			from = "the manifest pins"
		}
		return Ready{}, fmt.Errorf("the download of %s has sha256 %s, not %s as %s: refused, nothing of it kept (damaged or tampered with)",
			asset.Name, short(mismatch.Got), short(mismatch.Want), from)
	case err != nil:
		return Ready{}, fmt.Errorf("the download of %s failed: %s", asset.Name, oneLine(err))
	}
	defer os.Remove(archive)
	tmp := dir + ".new-" + strconv.Itoa(os.Getpid())
	os.RemoveAll(tmp)
	defer os.RemoveAll(tmp)
	if err := unpack(archive, tmp); err != nil {
		return Ready{}, fmt.Errorf("%s: %s", asset.Name, oneLine(err))
	}
	tools, err := findTools(tmp, r.Tools)
	if err != nil {
		return Ready{}, err
	}
	if err := check(ctx, tools, r.Env); err != nil {
		return Ready{}, err
	}
	ready := Ready{Tag: tag, Asset: asset.Name, Dir: dir, Tools: map[string]string{}, Searched: slices.Sorted(slices.Values(r.Tools))}
	for name, p := range tools {
		rel, err := filepath.Rel(tmp, p)
		if err != nil {
			return Ready{}, err
		}
		ready.Tools[name] = rel
	}
	record, err := json.Marshal(ready)
	if err != nil {
		return Ready{}, err
	}
	os.Remove(dir + ".ready")
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return Ready{}, err
	}
	if err := state.WriteAtomic(dir+".ready", record, 0o644); err != nil {
		return Ready{}, err
	}
	os.Remove(dir + ".failed")
	for name, rel := range ready.Tools {
		ready.Tools[name] = filepath.Join(dir, rel)
	}
	return ready, nil
}

// failure is a prebuilt that failed for a commit, remembered.
type failure struct {
	At  time.Time `json:"at"`
	Why string    `json:"why"`
}

func remember(dir string, err error) {
	if data, jerr := json.Marshal(failure{At: time.Now(), Why: oneLine(err)}); jerr == nil {
		_ = state.WriteAtomic(dir+".failed", data, 0o644)
	}
}

// failedBefore is why the prebuilt for dir failed within failedLife.
func failedBefore(dir string) (string, bool) {
	data, err := state.ReadRegular(dir+".failed", 1<<20, true)
	if err != nil {
		return "", false
	}
	var f failure
	if json.Unmarshal(data, &f) != nil {
		return "", false
	}
	age := time.Since(f.At)
	if age < 0 || age >= failedLife {
		return "", false
	}
	return f.Why + " (" + age.Round(time.Second).String() + " ago; tried again after an hour)", true
}

func isCommit(s string) bool {
	return len(s) == 40 && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// LookCheckout is Look for the checkout in dir as it is now (HEAD by one
// git run; its cleanness is not checked: a call checks it before it uses
// the prebuilt). For `guard which` and `guard status`.
func LookCheckout(ctx context.Context, stateDir, recipe, dir, pathEnv string, tools []string) (Ready, bool) {
	git, ok := resolve.LookPath("git", pathEnv)
	if !ok {
		return Ready{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, git, "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return Ready{}, false
	}
	return Look(stateDir, recipe, strings.TrimSpace(string(out)), runtime.GOARCH, tools)
}
