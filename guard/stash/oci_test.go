package stash

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/sign"
)

func ociRegistry(t *testing.T) (*registry.Client, string) {
	t.Helper()
	reg := guardtest.SignedInRegistry(t)
	return &registry.Client{PlainHTTP: []string{reg.Host}}, "oci://" + reg.Host + "/fleet/stash"
}

// Pushed signed, an entry comes back on a fresh machine that trusts the
// key, in one manifest request for its tag, and is then kept locally;
// `stash list oci://` says what is there.
func TestRegistryPushRestore(t *testing.T) {
	client, dest := ociRegistry(t)
	s, _, it := saved(t)
	key := testSecret(t)
	if n, err := s.Push(context.Background(), client, dest, nil, key); err != nil || n != 1 {
		t.Fatalf("push: %d %v", n, err)
	}
	fresh := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: []sign.PublicKey{key.Public()}, Registry: client}
	root := t.TempDir()
	got, err := fresh.Restore(context.Background(), "r", testKey, root, []string{"build"}, []string{dest})
	if err != nil || got.From != dest || got.Files != 3 {
		t.Fatalf("restore: %+v %v", got, err)
	}
	if link, err := os.Readlink(filepath.Join(root, "build/bin/libx.so.0")); err != nil || link != "libx.so.0.2.0" {
		t.Errorf("link: %q %v", link, err)
	}
	if items, _ := fresh.List(); len(items) != 1 || items[0].SHA256 != it.SHA256 {
		t.Errorf("kept locally: %+v, want sha256 %s", items, it.SHA256)
	}
	list, err := fresh.ListRegistry(context.Background(), client, dest)
	if err != nil || len(list) != 1 || list[0].Recipe != "r" || list[0].Key != testKey.Sum || list[0].Files != 3 || strings.Join(list[0].SignedBy, ",") != "fleet-1" {
		t.Errorf("list: %+v %v", list, err)
	}
	// Another key: no entry of it.
	other := testKey
	other.Sum = strings.Repeat("cd", 32)
	if _, err := fresh.Restore(context.Background(), "r", other, t.TempDir(), []string{"build"}, []string{dest}); !errors.Is(err, ErrNoEntry) {
		t.Errorf("another key: %v", err)
	}
}

// What a registry holds is trusted only when signed by a trusted key: an
// entry pushed unsigned or by another key is refused before its layer is
// fetched, never placed and never kept.
func TestRegistryRefusesUntrusted(t *testing.T) {
	client, dest := ociRegistry(t)
	s, _, _ := saved(t)
	signer, stranger := testSecret(t), testSecret(t)
	stranger.Name = "stranger-1"
	if _, err := s.Push(context.Background(), client, dest, nil, stranger); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		trusted []sign.PublicKey
		want    error
	}{
		{"no trusted keys", nil, sign.ErrNoTrust},
		{"signed by a key not trusted", []sign.PublicKey{signer.Public()}, sign.ErrUnknownKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			fresh := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: c.trusted, Registry: client}
			root := t.TempDir()
			_, err := fresh.Restore(context.Background(), "r", testKey, root, []string{"build"}, []string{dest})
			if !errors.Is(err, errUntrusted) || !errors.Is(err, c.want) {
				t.Fatalf("restore: %v, want %v", err, c.want)
			}
			if _, err := os.Lstat(filepath.Join(root, "build")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("something was placed: %v", err)
			}
			if items, _ := fresh.List(); len(items) != 0 {
				t.Errorf("kept locally: %v", items)
			}
		})
	}
	// The stranger's signature under the trusted key's name: refused.
	impostor := stranger
	impostor.Name = signer.Name
	if _, err := s.Push(context.Background(), client, dest, nil, impostor); err != nil {
		t.Fatal(err)
	}
	fresh := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: []sign.PublicKey{signer.Public()}, Registry: client}
	if _, err := fresh.Restore(context.Background(), "r", testKey, t.TempDir(), []string{"build"}, []string{dest}); !errors.Is(err, sign.ErrBadSig) {
		t.Errorf("a signature by another key under a trusted name: %v", err)
	}
	// Listed, the impostor's fleet-1 is no signer: it is a claim.
	list, err := fresh.ListRegistry(context.Background(), client, dest)
	if err != nil || len(list) != 1 || len(list[0].SignedBy) != 0 || list[0].Verified || strings.Join(list[0].Claimed, ",") != signer.Name || list[0].Unusable == "" {
		t.Errorf("list of an impostor's entry: %+v %v; want no signer, the claim, and why it is unusable", list, err)
	}
}

// A registry that is down costs one error, and the restore moves on to
// the next source.
func TestRegistryDownMovesOn(t *testing.T) {
	client, dest := ociRegistry(t)
	s, _, _ := saved(t)
	key := testSecret(t)
	shared := t.TempDir()
	if _, err := s.Export(shared, key); err != nil {
		t.Fatal(err)
	}
	down := "oci://127.0.0.1:1/fleet/stash"
	client.PlainHTTP = append(client.PlainHTTP, "127.0.0.1:1")
	fresh := &Store{Dir: filepath.Join(t.TempDir(), "stash"), Trusted: []sign.PublicKey{key.Public()}, Registry: client}
	got, err := fresh.Restore(context.Background(), "r", testKey, t.TempDir(), []string{"build"}, []string{down, dest, "file://" + shared})
	if err != nil || got.From != "file://"+shared {
		t.Fatalf("restore past a registry that is down and one without the entry: %+v %v", got, err)
	}
}
