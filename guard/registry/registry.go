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
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/errcode"
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
		if _, err := digest.Parse(d); err != nil || !strings.HasPrefix(d, "sha256:") {
			return Ref{}, fmt.Errorf("%q: the digest after @ must be sha256:64-hex", s)
		}
	} else if i := strings.LastIndex(repo, ":"); i >= 0 {
		repo, ref = repo[:i], repo[i+1:]
		if ref == "" {
			return Ref{}, fmt.Errorf("%q: empty tag after ':'", s)
		}
	}
	parsed := Ref{Host: host, Repo: repo, Reference: ref}
	// The registry package of oras checks host, path and tag as the
	// distribution spec writes them.
	full := host + "/" + repo
	if ref != "" && !strings.HasPrefix(ref, "sha256:") {
		full += ":" + ref
	}
	if _, err := remote.NewRepository(full); err != nil {
		return Ref{}, fmt.Errorf("%q: %w", s, err)
	}
	return parsed, nil
}

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
	repo    *remote.Repository
	timeout time.Duration
}

// Open returns the repository ref names. Credentials come from Docker's
// config (DOCKER_CONFIG or ~/.docker/config.json) and its helpers;
// without any the registry is asked anonymously.
func (c *Client) Open(ref Ref) (*Repository, error) {
	repo, err := remote.NewRepository(ref.Host + "/" + ref.Repo)
	if err != nil {
		return nil, err
	}
	repo.PlainHTTP = slices.Contains(c.PlainHTTP, ref.Host)
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
	client := &auth.Client{Client: &inner, Cache: auth.NewCache(), Header: http.Header{"User-Agent": {"guard"}}}
	store, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
	if err == nil {
		client.Credential = credentials.Credential(store)
	} // an unreadable Docker config: anonymous, as docker pull would be
	repo.Client = client
	return &Repository{Ref: ref, repo: repo, timeout: timeout}, nil
}

// ErrNotFound is the error for a tag, digest or blob the registry does
// not have.
var ErrNotFound = errdef.ErrNotFound

// explain adds the fix to an error a person can fix: a registry that asks
// for a sign-in none was given for.
func (r *Repository) explain(err error) error {
	var resp *errcode.ErrorResponse
	switch {
	case err == nil:
		return nil
	case errors.Is(err, auth.ErrBasicCredentialNotFound),
		errors.As(err, &resp) && resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w (%s asks for a sign-in: docker login %s, or oras login)", err, r.Host, r.Host)
	}
	return err
}

// Manifest is an image manifest with its digest.
type Manifest struct {
	ocispec.Manifest
	Digest digest.Digest
}

// FetchManifest reads the manifest reference (a tag or a digest) names:
// one request, at most maxManifest bytes, checked against its digest.
func (r *Repository) FetchManifest(ctx context.Context, reference string) (Manifest, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	desc, rc, err := r.repo.FetchReference(ctx, reference)
	if err != nil {
		return Manifest{}, r.explain(err)
	}
	defer rc.Close()
	if desc.Size > maxManifest {
		return Manifest{}, fmt.Errorf("%s: its manifest is %d bytes, over %d", r, desc.Size, maxManifest)
	}
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m.Manifest); err != nil {
		return Manifest{}, fmt.Errorf("%s: its manifest is not JSON: %w", r, err)
	}
	if m.MediaType != "" && m.MediaType != ocispec.MediaTypeImageManifest && m.MediaType != "application/vnd.docker.distribution.manifest.v2+json" {
		return Manifest{}, fmt.Errorf("%s: a %s, not an image manifest", r, m.MediaType)
	}
	m.Digest = desc.Digest
	return m, nil
}

// FetchBlob reads the blob desc names whole, refusing one larger than
// limit before a byte of it is read, and checks its digest.
func (r *Repository) FetchBlob(ctx context.Context, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit || desc.Size < 0 {
		return nil, fmt.Errorf("%s: blob %s is %d bytes, over %d", r, desc.Digest, desc.Size, limit)
	}
	ctx, cancel := context.WithTimeout(ctx, 4*r.timeout)
	defer cancel()
	rc, err := r.repo.Blobs().Fetch(ctx, desc)
	if err != nil {
		return nil, r.explain(err)
	}
	defer rc.Close()
	return content.ReadAll(io.LimitReader(rc, desc.Size+1), desc)
}

// Blob is a blob to push: its media type and bytes.
type Blob struct {
	MediaType string
	Data      []byte
}

// Push pushes layers and config (blobs the registry has already are not
// sent again) and a manifest of artifactType holding them, with
// annotations, tagged tag.
func (r *Repository) Push(ctx context.Context, tag, artifactType string, config Blob, layers []Blob, annotations map[string]string) (digest.Digest, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*r.timeout)
	defer cancel()
	var descs []ocispec.Descriptor
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
func (r *Repository) pushBlob(ctx context.Context, b Blob) (ocispec.Descriptor, error) {
	desc := content.NewDescriptorFromBytes(b.MediaType, b.Data)
	if ok, err := r.repo.Exists(ctx, desc); err == nil && ok {
		return desc, nil
	}
	err := r.repo.Push(ctx, desc, bytes.NewReader(b.Data))
	if errors.Is(err, errdef.ErrAlreadyExists) {
		err = nil
	}
	return desc, r.explain(err)
}

// pushManifest pushes config and a manifest of artifactType holding it and
// layers (pushed already), tagged tag.
func (r *Repository) pushManifest(ctx context.Context, tag, artifactType string, config Blob, layers []ocispec.Descriptor, annotations map[string]string) (digest.Digest, error) {
	cfg, err := r.pushBlob(ctx, config)
	if err != nil {
		return "", fmt.Errorf("push the config: %w", err)
	}
	// The manifest is written here, as oras.PackManifest would write it
	// (image-spec 1.1, an artifactType, the config and layers given): the
	// oras root package alone costs every guard process 0.2 ms of
	// package initialisation (docs/BENCHMARKS.md), and a shim call is one.
	data, err := json.Marshal(ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       cfg,
		Layers:       layers,
		Annotations:  annotations,
	})
	if err != nil {
		return "", err
	}
	man := content.NewDescriptorFromBytes(ocispec.MediaTypeImageManifest, data)
	if err := r.repo.PushReference(ctx, man, bytes.NewReader(data), tag); err != nil {
		return "", fmt.Errorf("push the manifest: %w", r.explain(err))
	}
	return man.Digest, nil
}

// Tags lists the repository's tags.
func (r *Repository) Tags(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var all []string
	err := r.repo.Tags(ctx, "", func(tags []string) error {
		all = append(all, tags...)
		if len(all) > 100000 {
			return errors.New("more than 100000 tags")
		}
		return nil
	})
	return all, r.explain(err)
}
