package stash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/sign"
	"github.com/sandbox-guard/guard/guard/units"
)

// A registry (oci://HOST/REPO) holds each entry as one OCI artifact
// (docs/registry.md): a manifest tagged stash-NAME (NAME the entry's file
// name, a hash of its recipe and key), whose one layer is the entry file
// exactly as the local stash keeps it, whose config blob says what the key
// was made of and which files it holds (for `guard stash list oci://…`),
// and whose annotations carry the recipe, the key and the signatures. A
// lookup is one manifest request for the tag its key gives.
const (
	ociArtifactType = "application/vnd.guard.stash.v1"
	ociLayerType    = "application/vnd.guard.stash.entry.v1"
	ociConfigType   = "application/vnd.guard.stash.config.v1+json"

	annRecipe     = "dev.guard.stash.recipe"
	annKey        = "dev.guard.stash.key"
	annSignatures = "dev.guard.stash.signatures" // one NAME:BASE64 a line
)

// ociTag is the tag of an entry in a registry.
func ociTag(recipe, key string) string {
	return "stash-" + strings.TrimSuffix(entryName(recipe, key), ".gst")
}

// LeaseTag is the tag, in the registry an entry of recipe for key is
// pushed to, of the fleet's lease on building it (docs/fleet-lease.md).
func LeaseTag(recipe, key string) string {
	return "lease-" + strings.TrimSuffix(entryName(recipe, key), ".gst")
}

// ociConfig is an entry's config blob.
type ociConfig struct {
	Recipe   string    `json:"recipe"`
	Key      string    `json:"key"`
	Source   string    `json:"source"`
	Compiler string    `json:"compiler"`
	Created  time.Time `json:"created"`
	Files    []ociFile `json:"files"`
}

type ociFile struct {
	Path   string `json:"path"`
	Mode   string `json:"mode,omitempty"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`
}

// Push pushes the local entries of recipes (all when none is named) to the
// registry dest, each signed by key, and returns how many it pushed.
func (s *Store) Push(ctx context.Context, client *registry.Client, dest string, recipes []string, key sign.SecretKey) (int, error) {
	return s.push(ctx, client, dest, key, func(it Item) bool { return len(recipes) == 0 || slices.Contains(recipes, it.Recipe) })
}

// PushEntry pushes the local entry of recipe for key to dest, signed by
// key: what stash_to does after a good build. ErrNoEntry when the stash
// has none.
func (s *Store) PushEntry(ctx context.Context, client *registry.Client, dest, recipe, entryKey string, key sign.SecretKey) error {
	n, err := s.push(ctx, client, dest, key, func(it Item) bool { return it.Recipe == recipe && it.Key == entryKey })
	if err == nil && n == 0 {
		err = ErrNoEntry
	}
	return err
}

// push pushes the local entries keep chooses, each signed by key.
func (s *Store) push(ctx context.Context, client *registry.Client, dest string, key sign.SecretKey, keep func(Item) bool) (int, error) {
	ref, err := registry.Parse(dest)
	if err != nil {
		return 0, err
	}
	repo, err := client.Open(ref)
	if err != nil {
		return 0, err
	}
	items, err := s.List()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		if !keep(it) {
			continue
		}
		if err := s.pushOne(ctx, repo, it, key); err != nil {
			return n, fmt.Errorf("stash entry %s of %s: %w", it.Name(), it.Recipe, err)
		}
		n++
	}
	return n, nil
}

func (s *Store) pushOne(ctx context.Context, repo *registry.Repository, it Item, key sign.SecretKey) error {
	data, err := readEntry(it, func(limit int64) ([]byte, error) { return s.readLocal(it, limit) })
	if err != nil {
		return err
	}
	h, _, err := parseEntry(data)
	if err != nil {
		return err
	}
	sig, err := Sign(data, key)
	if err != nil {
		return err
	}
	cfg := ociConfig{Recipe: h.Recipe, Key: h.Key, Source: h.Source, Compiler: h.Compiler, Created: it.Created.UTC()}
	for _, f := range h.Files {
		of := ociFile{Path: f.Path, Link: f.Link}
		if !f.IsLink() {
			of.Mode, of.Size, of.SHA256 = fmt.Sprintf("%04o", f.Mode.Perm()), f.Size, f.SHA256
		}
		cfg.Files = append(cfg.Files, of)
	}
	cfgJSON, _ := json.Marshal(cfg)
	ann := map[string]string{
		annRecipe:                  it.Recipe,
		annKey:                     it.Key,
		annSignatures:              sig,
		registry.AnnotationCreated: it.Created.UTC().Format(time.RFC3339),
		registry.AnnotationTitle:   it.Name(),
	}
	_, err = repo.Push(ctx, ociTag(it.Recipe, it.Key), ociArtifactType,
		registry.Blob{MediaType: ociConfigType, Data: cfgJSON},
		[]registry.Blob{{MediaType: ociLayerType, Data: data}}, ann)
	return err
}

// fromRegistry is fromSource for a registry: one manifest request for the
// tag of recipe and key; the signatures in its annotations are checked
// against the trusted keys' names before the layer is fetched, and the
// layer (its digest the registry checks for us, its size bounded before a
// byte is read) against them after.
func (s *Store) fromRegistry(ctx context.Context, src, recipe, key string) (Item, []byte, error) {
	if s.Registry == nil {
		return Item{}, nil, errors.New("no registry client")
	}
	ref, err := registry.Parse(src)
	if err != nil {
		return Item{}, nil, err
	}
	repo, err := s.Registry.Open(ref)
	if err != nil {
		return Item{}, nil, err
	}
	m, err := repo.FetchManifest(ctx, ociTag(recipe, key))
	if errors.Is(err, registry.ErrNotFound) {
		return Item{}, nil, ErrNoEntry
	}
	if err != nil {
		return Item{}, nil, err
	}
	name := entryName(recipe, key)
	if m.Annotations[annRecipe] != recipe || m.Annotations[annKey] != key {
		return Item{}, nil, fmt.Errorf("%s: tag %s holds recipe %.40q key %.12s, not the one asked for", src, ociTag(recipe, key), m.Annotations[annRecipe], m.Annotations[annKey])
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != ociLayerType {
		return Item{}, nil, fmt.Errorf("%s: tag %s is not a guard stash entry (one %s layer)", src, ociTag(recipe, key), ociLayerType)
	}
	layer := m.Layers[0]
	if err := layer.Digest.Validate(); err != nil || layer.Digest.Algorithm() != "sha256" {
		return Item{}, nil, fmt.Errorf("%s: tag %s: its layer's digest %.80q is not a sha256", src, ociTag(recipe, key), layer.Digest)
	}
	if len(s.Trusted) == 0 {
		return Item{}, nil, fmt.Errorf("entry %s %w: %w", name, errUntrusted, sign.ErrNoTrust)
	}
	sigs := parseSigs([]byte(m.Annotations[annSignatures]))
	if !namesTrusted(sigs, s.Trusted) {
		_, err := sign.Verify(nil, sigs, s.Trusted)
		return Item{}, nil, fmt.Errorf("entry %s %w: %w", name, errUntrusted, err)
	}
	if layer.Size > s.maxBytes() {
		return Item{}, nil, fmt.Errorf("its entry claims %d bytes, over the stash's bound of %d", layer.Size, s.maxBytes())
	}
	data, err := repo.FetchBlob(ctx, layer, s.maxBytes())
	if err != nil {
		return Item{}, nil, err
	}
	if _, err := verifyEntry(data, sigs, s.Trusted); err != nil {
		return Item{}, nil, fmt.Errorf("entry %s %w: %w", name, errUntrusted, err)
	}
	// Kept locally as made now: the created annotation is not signed,
	// and the local bound evicts by age.
	it := Item{Recipe: recipe, Key: key, Size: int64(len(data)), SHA256: layer.Digest.Encoded(), Created: time.Now()}
	return it, data, nil
}

// RemoteEntry is one entry of a registry, as `guard stash list oci://…`
// shows it. A registry's manifest, config and annotations are not signed:
// only the entry's header is (signed.go). So the recipe, key, source,
// compiler and files come from that header once a trusted key's signature
// of it verified (Verified), and until then from the unsigned config, as
// claims; the caller makes every string printable before showing it.
type RemoteEntry struct {
	Recipe   string    `json:"recipe"`
	Key      string    `json:"key"`
	Bytes    int64     `json:"bytes"`
	Created  time.Time `json:"created"` // the config's: never signed
	Source   string    `json:"source"`
	Compiler string    `json:"compiler"`
	Files    int       `json:"files"`
	// SignedBy names the trusted keys whose signature of the entry was
	// checked and verified; none when no signature verified.
	SignedBy []string `json:"signed_by"`
	// Verified says the fields above come from the signed header.
	Verified bool `json:"verified"`
	// Claimed are the key names the other signatures claim: by a key not
	// trusted here, or not verifying. Not to be shown as signers.
	Claimed []string `json:"claimed_signers,omitempty"`
	// Unusable says why a restore would refuse it, when it would.
	Unusable string `json:"unusable,omitempty"`
}

// ListRegistry lists the entries in the registry src: every stash- tag.
// An entry a trusted key claims to have signed is fetched (bounded by the
// stash's bound, as a restore bounds it) and its signatures checked; the
// others are listed from their unsigned config, unverified.
func (s *Store) ListRegistry(ctx context.Context, client *registry.Client, src string) ([]RemoteEntry, error) {
	ref, err := registry.Parse(src)
	if err != nil {
		return nil, err
	}
	repo, err := client.Open(ref)
	if err != nil {
		return nil, err
	}
	tags, err := repo.Tags(ctx)
	if err != nil {
		return nil, err
	}
	var out []RemoteEntry
	for _, tag := range tags {
		if !strings.HasPrefix(tag, "stash-") {
			continue
		}
		m, err := repo.FetchManifest(ctx, tag)
		if err != nil || len(m.Layers) != 1 || m.Config.MediaType != ociConfigType {
			continue // not one of guard's: another tool's artifact
		}
		data, err := repo.FetchBlob(ctx, m.Config, 1<<20)
		var cfg ociConfig
		if err != nil || json.Unmarshal(data, &cfg) != nil {
			continue
		}
		e := RemoteEntry{Recipe: cfg.Recipe, Key: cfg.Key, Bytes: m.Layers[0].Size, Created: cfg.Created, Source: cfg.Source, Compiler: cfg.Compiler, Files: len(cfg.Files), SignedBy: []string{}}
		sigs := parseSigs([]byte(m.Annotations[annSignatures]))
		e.Unusable = s.verifyRemote(ctx, repo, tag, m, sigs, &e)
		for _, sig := range sigs {
			name, _, _ := strings.Cut(sig, ":")
			if !slices.Contains(e.SignedBy, name) && !slices.Contains(e.Claimed, name) {
				e.Claimed = append(e.Claimed, name)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// verifyRemote checks an entry of a registry as a restore would, short of
// placing it: its layer fetched only when a trusted key's name is among
// its signatures, then each signature checked against the trusted keys.
// It fills e from the signed header when one verifies, and returns why a
// restore would refuse the entry ("" when it would take it).
func (s *Store) verifyRemote(ctx context.Context, repo *registry.Repository, tag string, m registry.Manifest, sigs []string, e *RemoteEntry) string {
	layer := m.Layers[0]
	switch {
	case len(s.Trusted) == 0:
		return "no key is trusted here ([stash] trusted_keys)"
	case len(sigs) == 0:
		return "unsigned"
	case !namesTrusted(sigs, s.Trusted):
		return "signed by no key trusted here"
	case layer.MediaType != ociLayerType:
		return "not a guard stash entry"
	case layer.Size > s.maxBytes():
		return fmt.Sprintf("%d bytes, over the stash's bound of %d", layer.Size, s.maxBytes())
	}
	data, err := repo.FetchBlob(ctx, layer, s.maxBytes())
	if err != nil {
		return "its layer cannot be read: " + units.OneLine(err)
	}
	msg, err := signedMessage(data)
	if err != nil {
		return "damaged: " + units.OneLine(err)
	}
	for _, sig := range sigs {
		if name, err := sign.Verify(msg, []string{sig}, s.Trusted); err == nil && !slices.Contains(e.SignedBy, name) {
			e.SignedBy = append(e.SignedBy, name)
		}
	}
	if len(e.SignedBy) == 0 {
		return "no signature by a trusted key verifies"
	}
	h, _, _ := parseEntry(data) // parsed by signedMessage already
	*e = RemoteEntry{Recipe: h.Recipe, Key: h.Key, Bytes: layer.Size, Created: e.Created, Source: h.Source, Compiler: h.Compiler, Files: len(h.Files), SignedBy: e.SignedBy, Verified: true}
	if ociTag(h.Recipe, h.Key) != tag {
		return "its tag " + tag + " is not that of its recipe and key"
	}
	return ""
}
