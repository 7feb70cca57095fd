package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sandbox-guard/guard/guard/registry"
)

// In a registry a lease is an artifact tagged from its work's key whose
// one annotation holds the record as JSON; its config and layer are the
// empty descriptor of image-spec 1.1, which the registry has after the
// first lease, so a renewal is two small requests and one manifest.
const (
	artifactType  = "application/vnd.guard.lease.v1"
	annotationKey = "dev.guard.lease"
)

// registryBoard is a Board in one repository of a registry.
type registryBoard struct{ repo *registry.Repository }

// OnRegistry is the board of leases in repo.
func OnRegistry(repo *registry.Repository) Board { return registryBoard{repo} }

var emptyJSON = registry.Blob{MediaType: registry.MediaTypeEmptyJSON, Data: []byte("{}")}

func (b registryBoard) Read(ctx context.Context, tag string) (Record, bool, error) {
	m, err := b.repo.FetchManifest(ctx, tag)
	if errors.Is(err, registry.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	if m.ArtifactType != artifactType {
		return Record{}, false, fmt.Errorf("%s: tag %s is not a guard lease (%.80q)", b.repo, tag, m.ArtifactType)
	}
	r, err := parseRecord([]byte(m.Annotations[annotationKey]))
	if err != nil {
		return r, false, fmt.Errorf("%s: tag %s: %w", b.repo, tag, err)
	}
	return r, true, nil
}

func (b registryBoard) Write(ctx context.Context, tag string, r Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = b.repo.Push(ctx, tag, artifactType, emptyJSON, []registry.Blob{emptyJSON}, map[string]string{annotationKey: string(data)})
	return err
}
