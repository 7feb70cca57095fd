package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/manifest"
)

// Declared is what a server says of a file before sending it. Hugging
// Face answers a HEAD of /<repo>/resolve/<rev>/<file> with a redirect to
// its CDN that carries X-Linked-Size and X-Linked-Etag (the sha256 of an
// LFS file); a mirror of the Hub may send the same headers, and any server
// that does is taken at its word, so a file can be verified without a pin.
type Declared struct {
	URL    string // the url asked
	Size   int64  // X-Linked-Size; 0 = not declared
	SHA256 string // X-Linked-Etag when it is a sha256 (lower-case hex); "" = not declared
}

// Check compares d with what the manifest says, size and sha256 (lower-case
// hex), 0 and "" when it says nothing: a declaration that contradicts it
// is a *MismatchError naming both, which the url's download could never
// pass.
func (d Declared) Check(size int64, sha256 string) error {
	if d.Size > 0 && size > 0 && d.Size != size {
		return &MismatchError{URL: d.URL, What: "size", Want: fmt.Sprint(size), Got: fmt.Sprint(d.Size), Declared: "X-Linked-Size"}
	}
	if d.SHA256 != "" && sha256 != "" && d.SHA256 != sha256 {
		return &MismatchError{URL: d.URL, What: "sha256", Want: sha256, Got: d.SHA256, Declared: "X-Linked-Etag"}
	}
	return nil
}

// declareTimeout bounds the HEAD when the caller gives no deadline.
const declareTimeout = 30 * time.Second

// Declare asks rawURL what it declares with one HEAD that does not follow
// a redirect (the headers are on the redirect itself), with HF_TOKEN where
// tokenAllowed says. A server that declares nothing, or answers the HEAD
// with an error status, gives a zero Declared and no error: the download
// itself will tell. The error is for a HEAD that got no answer: an
// *OfflineError when the machine seems offline. client nil is
// DefaultClient.
func Declare(ctx context.Context, client *http.Client, rawURL, token string) (Declared, error) {
	d := Declared{URL: rawURL}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return d, nil // file:// and the like declare nothing
	}
	if client == nil {
		client = DefaultClient()
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, declareTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return d, fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	req.Header.Set("User-Agent", "guard (model heal)")
	authorize(req, token)
	resp, err := c.Do(req)
	if err != nil {
		if offline(err) {
			return d, &OfflineError{URL: u.Redacted(), Err: unwrapURLError(err)}
		}
		return d, fmt.Errorf("%s: %w", u.Redacted(), unwrapURLError(err))
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return d, nil
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(resp.Header.Get("X-Linked-Size")), 10, 64); err == nil && n > 0 {
		d.Size = n
	}
	if sum := etagSHA256(resp.Header.Get("X-Linked-Etag")); sum != "" {
		d.SHA256 = sum
	}
	return d, nil
}

// etagSHA256 reads an ETag that is a sha256 ("…64 hex…", possibly weak);
// anything else (a git blob's sha1, an opaque tag) is "".
func etagSHA256(v string) string {
	v = strings.Trim(strings.TrimPrefix(strings.TrimSpace(v), "W/"), `"`)
	if !manifest.IsSHA256(v) {
		return ""
	}
	return strings.ToLower(v)
}

// declared checks what the url declares against the request before any
// download, and sets the sha256 this url's file must have: the request's
// own, else the declared one. A declaration that contradicts the request
// is a *MismatchError: the file could never verify, so nothing is
// downloaded.
func (d *download) declared(ctx context.Context, raw string) error {
	d.want, d.wantFrom = strings.ToLower(strings.TrimSpace(d.r.SHA256)), ""
	dctx, cancel := context.WithTimeout(ctx, d.r.RateWindow)
	defer cancel()
	decl, err := Declare(dctx, d.r.Client, raw, d.r.Token)
	if err != nil {
		var off *OfflineError
		if errors.As(err, &off) {
			return off
		}
		return nil // no answer to the HEAD: the GET will tell
	}
	decl.URL = redacted(raw) // as the messages name it
	if err := decl.Check(d.r.Size, d.want); err != nil {
		return err
	}
	if d.want == "" && decl.SHA256 != "" {
		d.want, d.wantFrom = decl.SHA256, decl.URL
	}
	return nil
}

func redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return raw
}
