package models

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/manifest"
)

// A model's urls may name registries: oci://HOST/REPO:TAG (or @sha256:…),
// whose manifest holds the GGUF as one raw layer, so its digest is the
// model's sha256 (docs/registry.md). Before a download, each is turned
// into its blob's address, and a layer whose digest disagrees with the
// pin (or whose size with the manifest's) is refused there, before a byte
// of the body is fetched. The download then treats the blob as any url:
// Range, resume (from another url of the same file too), progress, the
// stall rule; only the client differs, signed in to the registry.

// sources returns the urls of m a download reads, oci:// ones turned
// into blob addresses, the client that reaches them all, the sha256 the
// first registry addresses the model by, and one line for each registry
// refused or unreachable (the download goes on with the rest).
func (h *Healer) sources(ctx context.Context, m *manifest.Model) (urls []string, client *http.Client, declared string, refused []string) {
	client = h.Client
	if client == nil {
		client = fetch.DefaultClient()
	}
	var hosts map[string]http.RoundTripper
	for _, raw := range m.URLs {
		if !registry.IsRef(raw) {
			urls = append(urls, raw)
			continue
		}
		blob, sum, rt, err := h.resolve(ctx, raw, m)
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s: %v", raw, err))
			continue
		}
		if declared == "" {
			declared = sum
		}
		if hosts == nil {
			hosts = map[string]http.RoundTripper{}
		}
		u, _ := url.Parse(blob)
		hosts[u.Host] = rt
		urls = append(urls, blob)
	}
	if hosts != nil {
		base := client.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		c := *client
		c.Transport = byHost{hosts: hosts, base: base}
		client = &c
	}
	return urls, client, declared, refused
}

// resolve reads the manifest raw names and returns its GGUF layer's
// address, checked against the model's pin and size, and the transport
// signed in to its registry.
func (h *Healer) resolve(ctx context.Context, raw string, m *manifest.Model) (blob, sum string, rt http.RoundTripper, err error) {
	ref, err := registry.Parse(raw)
	if err != nil {
		return "", "", nil, err
	}
	if h.Registry == nil {
		return "", "", nil, fmt.Errorf("no registry client")
	}
	repo, err := h.Registry.Open(ref)
	if err != nil {
		return "", "", nil, err
	}
	layer, err := repo.ModelLayer(ctx)
	if err != nil {
		return "", "", nil, err
	}
	sum = layer.Digest.Encoded()
	switch {
	case m.SHA256 != "" && !strings.EqualFold(m.SHA256, sum):
		return "", "", nil, fmt.Errorf("its layer is sha256 %s, the manifest pins %s: refused before the download", sum, m.SHA256)
	case m.Size > 0 && layer.Size != m.Size:
		return "", "", nil, fmt.Errorf("its layer is %d bytes, the manifest says %d: refused before the download", layer.Size, m.Size)
	}
	return repo.BlobURL(layer), sum, repo.Transport(), nil
}

// byHost sends a request to a registry's host through that registry's
// signed-in transport, and any other through base.
type byHost struct {
	hosts map[string]http.RoundTripper
	base  http.RoundTripper
}

func (b byHost) RoundTrip(req *http.Request) (*http.Response, error) {
	if rt, ok := b.hosts[req.URL.Host]; ok {
		return rt.RoundTrip(req)
	}
	return b.base.RoundTrip(req)
}
