package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// A model is one GGUF file held whole as one raw layer, so that the
// layer's digest is the model's sha256 (docs/registry.md). These are the
// layouts read: guard's own, which is Docker Model Runner's layer type,
// and ollama's.
const (
	// MediaTypeGGUF is Docker Model Runner's layer of a GGUF file, and the
	// one `guard model push` writes.
	MediaTypeGGUF = "application/vnd.docker.ai.gguf.v3"
	// MediaTypeOllamaModel is ollama's layer of the model's weights.
	MediaTypeOllamaModel = "application/vnd.ollama.image.model"

	modelArtifactType = "application/vnd.guard.model.v1"
)

// ModelLayer returns the GGUF layer the reference of r names. A digest
// (REPO@sha256:HEX) is the model's own sha256: the blob of that digest
// (asked for with a HEAD, nothing of its body read), or failing that the
// manifest of that digest, as OCI names manifests. A tag (else "latest")
// names a manifest, whose one GGUF layer is the model: a manifest with
// none, or with several (a model in shards), is refused.
func (r *Repository) ModelLayer(ctx context.Context) (Descriptor, error) {
	ref := r.Reference
	if ref == "" {
		ref = "latest"
	}
	if strings.HasPrefix(ref, "sha256:") {
		ctx, cancel := context.WithTimeout(ctx, r.timeout)
		resp, err := r.send(ctx, request{method: http.MethodHead, url: r.base + "blobs/" + ref, scope: pullScope(r.Repo), want: http.StatusOK})
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.ContentLength < 0 {
				return Descriptor{}, fmt.Errorf("%s: the registry did not say the blob's size", r)
			}
			return Descriptor{MediaType: MediaTypeGGUF, Digest: Digest(ref), Size: resp.ContentLength}, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return Descriptor{}, err
		}
	}
	m, err := r.FetchManifest(ctx, ref)
	if err != nil {
		return Descriptor{}, err
	}
	var found []Descriptor
	for _, l := range m.Layers {
		if l.MediaType == MediaTypeGGUF || l.MediaType == MediaTypeOllamaModel {
			found = append(found, l)
		}
	}
	if len(found) == 1 {
		if err := found[0].Digest.Validate(); err != nil {
			return Descriptor{}, fmt.Errorf("%s: its GGUF layer's digest %.80q: %w", r, found[0].Digest, err)
		}
	}
	switch {
	case len(found) == 0:
		return Descriptor{}, fmt.Errorf("%s holds no GGUF layer (%s or %s)", r, MediaTypeGGUF, MediaTypeOllamaModel)
	case len(found) > 1:
		return Descriptor{}, fmt.Errorf("%s holds %d GGUF layers (a model in shards), not one file", r, len(found))
	case found[0].Digest.Algorithm() != "sha256":
		return Descriptor{}, fmt.Errorf("%s: its GGUF layer is %s, not a sha256", r, found[0].Digest)
	}
	return found[0], nil
}

// BlobURL is the address of a blob of r: a download with Range and
// resume reads it there, through Transport.
func (r *Repository) BlobURL(d Descriptor) string {
	return r.base + "blobs/" + string(d.Digest)
}

// Transport sends a request to r's registry signed in as r is (a token
// for the repository, fetched on the registry's challenge); a request to
// another host (a blob's redirect to its storage) goes out as the
// registry's client sends it, without the registry's credentials.
func (r *Repository) Transport() http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, _, err := r.auth.do(req.Clone(req.Context()), pullScope(r.Repo))
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// PushModel pushes the GGUF file f (named name) as one raw layer of
// Docker Model Runner's type, tagged with r's reference (else "latest"),
// and returns the layer's digest, the model's sha256, and its size. The
// file is read twice, to hash it and to send it, and never held in
// memory. Each wait on the registry is bounded (Open); the upload itself
// is not, since a model may take long.
func (r *Repository) PushModel(ctx context.Context, f *os.File, name string) (Digest, int64, error) {
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	layer := Descriptor{
		MediaType:   MediaTypeGGUF,
		Digest:      Digest("sha256:" + hex.EncodeToString(h.Sum(nil))),
		Size:        size,
		Annotations: map[string]string{AnnotationTitle: name},
	}
	ectx, cancel := context.WithTimeout(ctx, r.timeout)
	ok, err := r.exists(ectx, layer.Digest)
	cancel()
	if err != nil || !ok {
		// The file is sent as it was hashed: a file that changes under
		// the push fails the registry's digest check.
		if err := r.upload(ctx, layer, func() io.Reader { return io.NewSectionReader(f, 0, size) }); err != nil {
			return "", 0, fmt.Errorf("push %s: %w", name, err)
		}
	}
	tag := r.Reference
	if tag == "" {
		tag = "latest"
	}
	mctx, cancel := context.WithTimeout(ctx, 4*r.timeout)
	defer cancel()
	if _, err := r.pushManifest(mctx, tag, modelArtifactType, Blob{MediaType: MediaTypeEmptyJSON, Data: []byte("{}")}, []Descriptor{layer},
		map[string]string{AnnotationTitle: name}); err != nil {
		return "", 0, err
	}
	return layer.Digest, size, nil
}
