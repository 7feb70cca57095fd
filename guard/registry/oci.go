package registry

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// The OCI image-spec names this client writes and reads, kept here rather
// than imported: the image-spec and go-digest packages compile regular
// expressions when a process starts, and every guard process, a shim call
// included, would pay for them (docs/decisions.md, "guard's own registry
// client").
const (
	MediaTypeImageManifest  = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	MediaTypeEmptyJSON      = "application/vnd.oci.empty.v1+json"

	// AnnotationTitle is a layer's or manifest's file name.
	AnnotationTitle = "org.opencontainers.image.title"
	// AnnotationCreated is when a manifest was made (RFC 3339).
	AnnotationCreated = "org.opencontainers.image.created"
)

// Digest is an OCI content digest, ALGORITHM:HEX (sha256:…).
type Digest string

// DigestOf is the sha256 digest of data.
func DigestOf(data []byte) Digest {
	sum := sha256.Sum256(data)
	return Digest("sha256:" + hex.EncodeToString(sum[:]))
}

func (d Digest) String() string { return string(d) }

// Algorithm is the part before the colon ("sha256").
func (d Digest) Algorithm() string {
	a, _, _ := strings.Cut(string(d), ":")
	return a
}

// Encoded is the hex after the colon.
func (d Digest) Encoded() string {
	_, e, _ := strings.Cut(string(d), ":")
	return e
}

// hexLen is the encoded length of each algorithm a digest may use: those
// go-digest knows, as registries write them.
func hexLen(algorithm string) int {
	switch algorithm {
	case "sha256":
		return 64
	case "sha384":
		return 96
	case "sha512":
		return 128
	}
	return 0
}

// Validate checks d is ALGORITHM:HEX of a known algorithm, its hex in
// lower case and of the algorithm's length.
func (d Digest) Validate() error {
	a, e, ok := strings.Cut(string(d), ":")
	if !ok || a == "" || e == "" {
		return errors.New("invalid checksum digest format")
	}
	n := hexLen(a)
	if n == 0 {
		return errors.New("unsupported digest algorithm")
	}
	if len(e) != n || !isLowerHex(e) {
		return errors.New("invalid checksum digest length or characters")
	}
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// hasher is the hash of d's algorithm (d valid).
func (d Digest) hasher() hash.Hash {
	switch d.Algorithm() {
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return sha256.New()
}

// verify checks data is what d names.
func (d Digest) verify(data []byte) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("digest %.80q: %w", d, err)
	}
	h := d.hasher()
	h.Write(data)
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Encoded() {
		return fmt.Errorf("the content is %s:%s, not %s", d.Algorithm(), got, d)
	}
	return nil
}

// Descriptor names a blob or manifest: its media type, digest and size
// (image-spec's descriptor; fields guard does not use are left out and
// ignored when read).
type Descriptor struct {
	MediaType    string            `json:"mediaType"`
	Digest       Digest            `json:"digest"`
	Size         int64             `json:"size"`
	URLs         []string          `json:"urls,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Data         []byte            `json:"data,omitempty"`
	ArtifactType string            `json:"artifactType,omitempty"`
}

// descriptorOf is the descriptor of data as a blob of mediaType.
func descriptorOf(mediaType string, data []byte) Descriptor {
	return Descriptor{MediaType: mediaType, Digest: DigestOf(data), Size: int64(len(data))}
}

// Manifest is an image manifest as image-spec 1.1 writes it, with the
// digest it was read or pushed by.
type Manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType,omitempty"`
	ArtifactType  string            `json:"artifactType,omitempty"`
	Config        Descriptor        `json:"config"`
	Layers        []Descriptor      `json:"layers"`
	Subject       *Descriptor       `json:"subject,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`

	Digest Digest `json:"-"`
}
