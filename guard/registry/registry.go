// Package registry is guard's client of OCI registries (ghcr.io, ECR,
// Harbor, a plain distribution registry): what a fleet already runs to
// share builds and models (docs/registry.md). It names a repository as
// oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX], signs in with the credentials
// Docker and ORAS write (~/.docker/config.json and its credential
// helpers; anonymous when there are none), speaks plain http only to a
// host the manifest marks as one, and bounds every read: a manifest by
// maxManifest, a blob by what its caller can take, each request by a
// timeout. It knows nothing of stashes or models: those put their own
// bytes in and read them back.
//
// The client is guard's own, a few requests of the distribution spec
// (docs/registry.md), not oras-go: every guard process, a shim call
// included, initialises each package it links, and oras-go's and
// go-digest's regular expressions cost every call more than the rest of
// its start (docs/decisions.md). oras-go stays in the tests as the
// reference this client must agree with.
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Scheme is how the manifest names a registry source.
const Scheme = "oci://"

// maxManifest bounds a manifest: a few layers and annotations.
const maxManifest = 1 << 20

// Ref is a parsed oci:// reference.
type Ref struct {
	Host      string // registry host[:port]
	Repo      string // repository path
	Reference string // tag or sha256:HEX digest; "" when none was given
}

// String is the reference as the manifest writes it.
func (r Ref) String() string {
	s := Scheme + r.Host + "/" + r.Repo
	switch {
	case strings.HasPrefix(r.Reference, "sha256:"):
		s += "@" + r.Reference
	case r.Reference != "":
		s += ":" + r.Reference
	}
	return s
}

// IsRef reports whether s names a registry (oci://…).
func IsRef(s string) bool { return strings.HasPrefix(s, Scheme) }

// Parse reads oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX].
func Parse(s string) (Ref, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Ref{}, fmt.Errorf("%q: a registry is named oci://HOST/REPO", s)
	}
	host, repo, ok := strings.Cut(rest, "/")
	if !ok || host == "" || repo == "" {
		return Ref{}, fmt.Errorf("%q: want oci://HOST[:PORT]/REPO[:TAG]", s)
	}
	var ref string
	if r, d, ok := strings.Cut(repo, "@"); ok {
		repo, ref = r, d
		if !strings.HasPrefix(d, "sha256:") || Digest(d).Validate() != nil {
			return Ref{}, fmt.Errorf("%q: the digest after @ must be sha256:64-hex", s)
		}
	} else if i := strings.LastIndex(repo, ":"); i >= 0 {
		repo, ref = repo[:i], repo[i+1:]
		if ref == "" {
			return Ref{}, fmt.Errorf("%q: empty tag after ':'", s)
		}
	}
	switch {
	case !validHost(host):
		return Ref{}, fmt.Errorf("%q: invalid registry %q", s, host)
	case !validRepo(repo):
		return Ref{}, fmt.Errorf("%q: invalid repository %q: lower-case letters and digits, parts joined by '.', '_', '__' or dashes, folders by '/'", s, repo)
	case ref != "" && !strings.HasPrefix(ref, "sha256:") && !validTag(ref):
		return Ref{}, fmt.Errorf("%q: invalid tag %q: letters, digits, '_', '.' and '-', at most 128, not starting with '.' or '-'", s, ref)
	}
	return Ref{Host: host, Repo: repo, Reference: ref}, nil
}

// validHost is a registry's HOST[:PORT], checked as oras-go checks it:
// what a URL's host reads back unchanged.
func validHost(host string) bool {
	u, err := url.ParseRequestURI("dummy://" + host)
	return err == nil && u.Host != "" && u.Host == host
}

// validRepo is distribution's repository grammar: components of [a-z0-9]
// joined by '.', '_', '__' or any run of '-', separated by '/'.
func validRepo(repo string) bool {
	for _, comp := range strings.Split(repo, "/") {
		if comp == "" || !alnum(comp[0]) || !alnum(comp[len(comp)-1]) {
			return false
		}
		for i := 0; i < len(comp); {
			c := comp[i]
			switch {
			case alnum(c):
				i++
			case c == '.':
				if !alnum(comp[i+1]) {
					return false
				}
				i++
			case c == '_':
				if comp[i+1] == '_' {
					i++
				}
				if !alnum(comp[i+1]) {
					return false
				}
				i++
			case c == '-':
				for comp[i] == '-' {
					i++
				}
				if !alnum(comp[i]) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// validTag is the distribution spec's tag: [\w][\w.-]{0,127}.
func validTag(tag string) bool {
	if len(tag) == 0 || len(tag) > 128 || !word(tag[0]) {
		return false
	}
	for i := 1; i < len(tag); i++ {
		if c := tag[i]; !word(c) && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func word(c byte) bool { return alnum(c) || c >= 'A' && c <= 'Z' || c == '_' }

// Client reaches registries.
type Client struct {
	// PlainHTTP lists the hosts (HOST[:PORT]) spoken to over http: those
	// the manifest marks ([registry] plain_http); every other is https.
	PlainHTTP []string
	// HTTP is the client under the registry's auth; nil = a default one.
	HTTP *http.Client
	// Timeout bounds each request but blob reads; 0 = 30 s.
	Timeout time.Duration
}

// Repository is one repository of a registry, signed in.
type Repository struct {
	Ref
	auth    *authClient
	base    string // SCHEME://HOST/v2/REPO/
	timeout time.Duration
}

// Open returns the repository ref names. Credentials come from Docker's
// config (DOCKER_CONFIG or ~/.docker/config.json) and its helpers, looked
// up on the registry's first challenge; without any the registry is
// asked anonymously.
func (c *Client) Open(ref Ref) (*Repository, error) {
	if !validHost(ref.Host) || !validRepo(ref.Repo) {
		return nil, fmt.Errorf("%s: invalid registry or repository", ref)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	hc := c.HTTP
	if hc == nil {
		// No limit on a whole request (a model's blob may take an
		// hour), but on each wait for the other side: the connection,
		// the TLS handshake and the first byte of an answer. A registry
		// that accepts and never answers costs this, not a hang.
		hc = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			ForceAttemptHTTP2:     true,
		}}
	}
	// A redirect (a blob to its storage) is followed on the rules the
	// manifest's downloads follow: never to plain http but to a host
	// marked as one, at most 10.
	plain := c.PlainHTTP
	inner := *hc
	inner.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("more than 10 redirects")
		}
		if req.URL.Scheme == "http" && !slices.Contains(plain, req.URL.Host) {
			return fmt.Errorf("refused a redirect to plain http %s", req.URL.Redacted())
		}
		return nil
	}
	// Docker Hub is named docker.io and served at registry-1.docker.io.
	to := ref.Host
	if to == "docker.io" {
		to = "registry-1.docker.io"
	}
	scheme := "https"
	if slices.Contains(c.PlainHTTP, ref.Host) {
		scheme = "http"
	}
	return &Repository{
		Ref:     ref,
		auth:    &authClient{hc: &inner, host: ref.Host, to: to, plain: c.PlainHTTP},
		base:    scheme + "://" + to + "/v2/" + ref.Repo + "/",
		timeout: timeout,
	}, nil
}

// request is one request to the registry: method at url with header,
// a body when open is set (open gives a fresh reader of size bytes each
// time it is called, for the sign-in's second try), signed in for scope,
// and the status that answers it.
type request struct {
	method, url string
	header      http.Header
	open        func() io.Reader
	size        int64
	scope       string
	want        int
}

// send sends q. An answer of another status than q.want is returned as
// an *Error, its body read and closed.
func (r *Repository) send(ctx context.Context, q request) (*http.Response, error) {
	var body io.Reader
	if q.open != nil {
		body = q.open()
	}
	req, err := http.NewRequestWithContext(ctx, q.method, q.url, body)
	if err != nil {
		return nil, err
	}
	switch {
	case q.open != nil && q.size == 0:
		req.Body, req.ContentLength = http.NoBody, 0
	case q.open != nil:
		req.ContentLength = q.size
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(q.open()), nil }
	}
	for k, v := range q.header {
		req.Header[k] = v
	}
	resp, sent, err := r.auth.do(req, q.scope)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != q.want {
		return nil, errorOf(resp, sent, r.Host, r.Repo)
	}
	return resp, nil
}

// manifestAccept is the manifests asked for, as oras-go asks.
const manifestAccept = MediaTypeImageManifest + ", " + MediaTypeDockerManifest +
	", application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json"

// FetchManifest reads the manifest reference (a tag or a digest) names:
// one request, at most maxManifest bytes, checked against its digest (the
// one asked for, and the one the registry says it sent).
func (r *Repository) FetchManifest(ctx context.Context, reference string) (Manifest, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.send(ctx, request{method: http.MethodGet, url: r.base + "manifests/" + reference, header: http.Header{"Accept": {manifestAccept}}, scope: pullScope(r.Repo), want: http.StatusOK})
	if err != nil {
		return Manifest{}, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > maxManifest {
		return Manifest{}, fmt.Errorf("%s: its manifest is %d bytes, over %d", r, resp.ContentLength, maxManifest)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxManifest+1))
	if err != nil {
		return Manifest{}, err
	}
	if len(data) > maxManifest {
		return Manifest{}, fmt.Errorf("%s: its manifest is over %d bytes", r, maxManifest)
	}
	if resp.ContentLength >= 0 && int64(len(data)) != resp.ContentLength {
		return Manifest{}, fmt.Errorf("%s: its manifest is %d bytes, the registry said %d", r, len(data), resp.ContentLength)
	}
	dgst := Digest(resp.Header.Get("Docker-Content-Digest"))
	if strings.Contains(reference, ":") {
		if dgst != "" && dgst != Digest(reference) {
			return Manifest{}, fmt.Errorf("%s: asked for manifest %s, the registry sent %s", r, reference, dgst)
		}
		dgst = Digest(reference)
	}
	if dgst == "" {
		dgst = DigestOf(data)
	}
	if err := dgst.verify(data); err != nil {
		return Manifest{}, fmt.Errorf("%s: its manifest: %w", r, err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("%s: its manifest is not JSON: %w", r, err)
	}
	if m.MediaType != "" && m.MediaType != MediaTypeImageManifest && m.MediaType != MediaTypeDockerManifest {
		return Manifest{}, fmt.Errorf("%s: a %s, not an image manifest", r, m.MediaType)
	}
	m.Digest = dgst
	return m, nil
}

// FetchBlob reads the blob desc names whole, refusing one larger than
// limit before a byte of it is read, and checks its digest.
func (r *Repository) FetchBlob(ctx context.Context, desc Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit || desc.Size < 0 {
		return nil, fmt.Errorf("%s: blob %s is %d bytes, over %d", r, desc.Digest, desc.Size, limit)
	}
	if err := desc.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("%s: blob digest %.80q: %w", r, desc.Digest, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 4*r.timeout)
	defer cancel()
	resp, err := r.send(ctx, request{method: http.MethodGet, url: r.base + "blobs/" + string(desc.Digest), scope: pullScope(r.Repo), want: http.StatusOK})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength >= 0 && resp.ContentLength != desc.Size {
		return nil, fmt.Errorf("%s: blob %s is %d bytes, its descriptor says %d", r, desc.Digest, resp.ContentLength, desc.Size)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, desc.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != desc.Size {
		return nil, fmt.Errorf("%s: blob %s is %d bytes or more, its descriptor says %d", r, desc.Digest, len(data), desc.Size)
	}
	if err := desc.Digest.verify(data); err != nil {
		return nil, fmt.Errorf("%s: blob: %w", r, err)
	}
	return data, nil
}

// Blob is a blob to push: its media type and bytes.
type Blob struct {
	MediaType string
	Data      []byte
}

// Push pushes layers and config (blobs the registry has already are not
// sent again) and a manifest of artifactType holding them, with
// annotations, tagged tag.
func (r *Repository) Push(ctx context.Context, tag, artifactType string, config Blob, layers []Blob, annotations map[string]string) (Digest, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*r.timeout)
	defer cancel()
	var descs []Descriptor
	for _, l := range layers {
		d, err := r.pushBlob(ctx, l)
		if err != nil {
			return "", fmt.Errorf("push a layer: %w", err)
		}
		descs = append(descs, d)
	}
	return r.pushManifest(ctx, tag, artifactType, config, descs, annotations)
}

// pushBlob pushes b unless the registry has it.
func (r *Repository) pushBlob(ctx context.Context, b Blob) (Descriptor, error) {
	desc := descriptorOf(b.MediaType, b.Data)
	if ok, err := r.exists(ctx, desc.Digest); err == nil && ok {
		return desc, nil
	}
	return desc, r.upload(ctx, desc, func() io.Reader { return bytes.NewReader(b.Data) })
}

// exists asks whether the registry has the blob dgst (a HEAD).
func (r *Repository) exists(ctx context.Context, dgst Digest) (bool, error) {
	resp, err := r.send(ctx, request{method: http.MethodHead, url: r.base + "blobs/" + string(dgst), scope: pushScope(r.Repo), want: http.StatusOK})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return true, nil
}

// upload sends a blob as the distribution spec's monolithic upload: a
// POST opens a session, one PUT of every byte with the digest closes it
// (the registry checks the digest). open gives the bytes from the start.
func (r *Repository) upload(ctx context.Context, desc Descriptor, open func() io.Reader) error {
	scope := pushScope(r.Repo)
	resp, err := r.send(ctx, request{method: http.MethodPost, url: r.base + "blobs/uploads/", scope: scope, want: http.StatusAccepted})
	if err != nil {
		return err
	}
	drain(resp)
	loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	if err != nil || resp.Header.Get("Location") == "" {
		return fmt.Errorf("%s: the registry opened an upload without a usable Location", r)
	}
	q := loc.Query()
	q.Set("digest", string(desc.Digest))
	loc.RawQuery = q.Encode()
	resp, err = r.send(ctx, request{method: http.MethodPut, url: loc.String(), header: http.Header{"Content-Type": {"application/octet-stream"}}, open: open, size: desc.Size, scope: scope, want: http.StatusCreated})
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// pushManifest pushes config and a manifest of artifactType holding it and
// layers (pushed already), tagged tag: image-spec 1.1, as oras-go's
// PackManifest writes it.
func (r *Repository) pushManifest(ctx context.Context, tag, artifactType string, config Blob, layers []Descriptor, annotations map[string]string) (Digest, error) {
	cfg, err := r.pushBlob(ctx, config)
	if err != nil {
		return "", fmt.Errorf("push the config: %w", err)
	}
	if layers == nil {
		layers = []Descriptor{}
	}
	data, err := json.Marshal(Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeImageManifest,
		ArtifactType:  artifactType,
		Config:        cfg,
		Layers:        layers,
		Annotations:   annotations,
	})
	if err != nil {
		return "", err
	}
	dgst := DigestOf(data)
	resp, err := r.send(ctx, request{method: http.MethodPut, url: r.base + "manifests/" + tag, header: http.Header{"Content-Type": {MediaTypeImageManifest}}, open: func() io.Reader { return bytes.NewReader(data) }, size: int64(len(data)), scope: pushScope(r.Repo), want: http.StatusCreated})
	if err != nil {
		return "", fmt.Errorf("push the manifest: %w", err)
	}
	drain(resp)
	if got := resp.Header.Get("Docker-Content-Digest"); got != "" && Digest(got) != dgst {
		return "", fmt.Errorf("push the manifest: the registry took it as %s, not %s", got, dgst)
	}
	return dgst, nil
}

// maxTagPage bounds one page of the tag list.
const maxTagPage = 8 << 20

// Tags lists the repository's tags, following the registry's pages (its
// Link header). A repository nothing was pushed to answers ErrNothingPushed.
func (r *Repository) Tags(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var all []string
	next := r.base + "tags/list"
	for next != "" {
		resp, err := r.send(ctx, request{method: http.MethodGet, url: next, scope: pullScope(r.Repo), want: http.StatusOK})
		var re *Error
		if errors.As(err, &re) {
			re.tagList = true
		}
		if err != nil {
			return nil, err
		}
		var page struct {
			Tags []string `json:"tags"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, maxTagPage)).Decode(&page)
		link := resp.Header.Get("Link")
		here := resp.Request.URL
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: its tag list is not JSON: %w", r, err)
		}
		all = append(all, page.Tags...)
		if len(all) > 100000 {
			return nil, errors.New("more than 100000 tags")
		}
		next = ""
		if l, ok := nextLink(link); ok {
			u, err := here.Parse(l)
			if err != nil {
				return nil, fmt.Errorf("%s: its tag list's next page %.200q: %w", r, l, err)
			}
			next = u.String()
		}
	}
	return all, nil
}

// nextLink reads the address of a Link header's rel="next": <URL>; rel="next".
func nextLink(h string) (string, bool) {
	for _, part := range strings.Split(h, ",") {
		addr, params, ok := strings.Cut(part, ";")
		addr = strings.TrimSpace(addr)
		if ok && strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) && strings.HasPrefix(addr, "<") && strings.HasSuffix(addr, ">") {
			return addr[1 : len(addr)-1], true
		}
	}
	return "", false
}
