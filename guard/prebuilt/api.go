package prebuilt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/state"
)

// DefaultAPI is GitHub's public API, used when GITHUB_API_URL is unset.
const DefaultAPI = "https://api.github.com"

// How long an answer of the releases API is kept (docs/prebuilt.md): a
// release found with its assets changes rarely; "no such release" may
// change when the project publishes it; an API that could not be reached
// is asked again soon, but not by every call.
const (
	FoundLife  = 24 * time.Hour
	NoneLife   = time.Hour
	FailedLife = 10 * time.Minute
)

// requestTimeout bounds one API request: an unreachable API costs a call
// this at most, once per FailedLife.
const requestTimeout = 15 * time.Second

// maxAnswerBytes bounds an API answer read (llama.cpp's releases carry
// about forty assets: some tens of KiB).
const maxAnswerBytes = 4 << 20

// Release is what the releases API says of one tag.
type Release struct {
	Tag string `json:"tag_name"`
	// Commit is the release's target_commitish: the commit it was made
	// from when the project names it by sha, else a branch name.
	Commit string  `json:"target_commitish"`
	Assets []Asset `json:"assets"`
}

// Asset is one file of a release.
type Asset struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // "sha256:HEX" where GitHub declares it
	URL    string `json:"browser_download_url"`
}

// SHA256 is the asset's declared sha256 in hex, "" when GitHub declares none.
func (a Asset) SHA256() string {
	if hexSum, ok := strings.CutPrefix(a.Digest, "sha256:"); ok && len(hexSum) == 64 {
		return strings.ToLower(hexSum)
	}
	return ""
}

// Asset is the release's asset named name.
func (r Release) Asset(name string) (Asset, bool) {
	for _, a := range r.Assets {
		if a.Name == name {
			return a, true
		}
	}
	return Asset{}, false
}

// ErrNoRelease is a tag the project published no release for.
var ErrNoRelease = errors.New("no release")

// Client asks GitHub's releases API, at most once per tag per machine
// within an answer's life: anonymous clients get 60 requests an hour, and
// a fleet behind one address shares them. Its answers are kept under Dir
// (the state folder's prebuilt/api), which the sandboxes of a machine
// that share a state folder share.
type Client struct {
	Base  string // the API's base URL: GITHUB_API_URL, else DefaultAPI
	Token string // GITHUB_TOKEN or GH_TOKEN; "" = anonymous
	Dir   string // where answers are kept
	HTTP  *http.Client
	// Requests counts the requests this client made (tests, `-v` lines).
	Requests int
	now      func() time.Time
}

// answer is one kept API answer.
type answer struct {
	Asked   time.Time `json:"asked"`
	Result  string    `json:"result"` // "found", "none" or "failed"
	Error   string    `json:"error,omitempty"`
	Release *Release  `json:"release,omitempty"`
}

func (a answer) life() time.Duration {
	switch a.Result {
	case "found":
		return FoundLife
	case "none":
		return NoneLife
	}
	return FailedLife
}

func (c *Client) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

func (c *Client) base() string {
	if c.Base == "" {
		return DefaultAPI
	}
	return strings.TrimRight(c.Base, "/")
}

// answerPath names the kept answer of repo's tag at this API.
func (c *Client) answerPath(repo, tag string) string {
	h := sha256.Sum256([]byte(c.base() + "\n" + repo + "\n" + tag))
	return filepath.Join(c.Dir, hex.EncodeToString(h[:16])+".json")
}

// Release is repo's release of tag: from the kept answer while it lives,
// else from one API request, whose answer is kept (a failure too, for
// FailedLife: an unreachable API costs one bounded wait, then nothing).
// A tag without a release is ErrNoRelease. cached reports an answer that
// was kept.
func (c *Client) Release(ctx context.Context, repo, tag string) (rel Release, cached bool, err error) {
	p := c.answerPath(repo, tag)
	if a, ok := c.kept(p); ok {
		rel, err := a.outcome()
		return rel, true, err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return Release{}, false, err
	}
	// One request per machine: a second sandbox asking the same tag
	// waits for the first one's answer and reads it.
	held, err := lock.Acquire(ctx, p+".lock", nil)
	if err != nil {
		return Release{}, false, err
	}
	defer held.Release()
	if a, ok := c.kept(p); ok {
		rel, err := a.outcome()
		return rel, true, err
	}
	a := c.ask(ctx, repo, tag)
	if ctx.Err() != nil {
		return Release{}, false, ctx.Err() // the call's end, not the API's answer: not kept
	}
	if data, err := json.Marshal(a); err == nil {
		_ = state.WriteAtomic(p, data, 0o644)
	}
	rel, err = a.outcome()
	return rel, false, err
}

// kept is the answer at p while it lives.
func (c *Client) kept(p string) (answer, bool) {
	data, err := state.ReadRegular(p, maxAnswerBytes, true)
	if err != nil {
		return answer{}, false
	}
	var a answer
	if json.Unmarshal(data, &a) != nil || (a.Result == "found" && a.Release == nil) {
		return answer{}, false
	}
	age := c.clock().Sub(a.Asked)
	return a, age >= 0 && age < a.life()
}

func (a answer) outcome() (Release, error) {
	switch a.Result {
	case "found":
		return *a.Release, nil
	case "none":
		return Release{}, ErrNoRelease
	}
	return Release{}, errors.New(a.Error)
}

// ask makes the one request.
func (c *Client) ask(ctx context.Context, repo, tag string) answer {
	a := answer{Asked: c.clock(), Result: "failed"}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	u := c.base() + "/repos/" + repo + "/releases/tags/" + url.PathEscape(tag)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		a.Error = err.Error()
		return a
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	c.Requests++
	resp, err := client.Do(req)
	if err != nil {
		a.Error = fmt.Sprintf("the releases API at %s cannot be reached (%v)", c.base(), shortNetError(err))
		return a
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		a.Result = "none"
		return a
	case resp.StatusCode != http.StatusOK:
		a.Error = fmt.Sprintf("the releases API answered %s for %s's %s", resp.Status, repo, tag)
		if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
			a.Error += " (rate limit? set GITHUB_TOKEN)"
		}
		return a
	case err != nil:
		a.Error = fmt.Sprintf("reading the releases API's answer: %v", err)
		return a
	case len(body) > maxAnswerBytes:
		a.Error = "the releases API's answer is larger than 4 MiB"
		return a
	}
	var rel Release
	if err := json.Unmarshal(body, &rel); err != nil || rel.Tag == "" {
		a.Error = fmt.Sprintf("the releases API's answer for %s is not a release", tag)
		return a
	}
	a.Result, a.Release = "found", &rel
	return a
}

// shortNetError is err without the request's method and URL, which the
// message names already.
func shortNetError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
