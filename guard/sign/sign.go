// Package sign makes and checks the ed25519 signatures that let a fleet
// share what it builds (docs/stash.md, "Signed entries"): a stash entry from
// a shared source is code every sandbox runs, so it is used only when a
// key the manifest trusts signed it.
//
// Keys and signatures are written as Nix writes them, NAME:BASE64: a
// public key is "fleet-1:" and the 32 bytes of an ed25519 public key, a
// secret key "fleet-1:" and the 64 bytes of its private key, a signature
// "fleet-1:" and 64 signature bytes. The name says which key signed, so a
// check tries only the trusted key of that name.
package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// PublicKey is a key that checks signatures.
type PublicKey struct {
	Name string
	Key  ed25519.PublicKey
}

// SecretKey is a key that signs.
type SecretKey struct {
	Name string
	Key  ed25519.PrivateKey
}

// String is the key as a manifest lists it: NAME:BASE64.
func (k PublicKey) String() string { return k.Name + ":" + base64.StdEncoding.EncodeToString(k.Key) }

// String is the key as its file holds it: NAME:BASE64.
func (k SecretKey) String() string { return k.Name + ":" + base64.StdEncoding.EncodeToString(k.Key) }

// Public is the public half of k.
func (k SecretKey) Public() PublicKey {
	return PublicKey{Name: k.Name, Key: k.Key.Public().(ed25519.PublicKey)}
}

// Generate makes a new key pair named name.
func Generate(name string) (SecretKey, error) {
	if err := checkName(name); err != nil {
		return SecretKey{}, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return SecretKey{}, err
	}
	return SecretKey{Name: name, Key: priv}, nil
}

// checkName accepts a key name as Nix does: not empty, no colon, no space.
func checkName(name string) error {
	if name == "" || len(name) > 128 || strings.ContainsAny(name, ": \t\r\n\x00") {
		return fmt.Errorf("key name %.40q: want a short name with no colon and no space (fleet-1)", name)
	}
	return nil
}

// split reads NAME:BASE64 holding n bytes.
func split(s string, n int, what string) (string, []byte, error) {
	name, b64, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return "", nil, fmt.Errorf("%s %.60q: want NAME:BASE64", what, s)
	}
	if err := checkName(name); err != nil {
		return "", nil, fmt.Errorf("%s: %w", what, err)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != n {
		return "", nil, fmt.Errorf("%s %q: the part after the colon must be %d bytes in base64", what, name, n)
	}
	return name, raw, nil
}

// ParsePublic reads a public key, NAME:BASE64.
func ParsePublic(s string) (PublicKey, error) {
	name, raw, err := split(s, ed25519.PublicKeySize, "public key")
	return PublicKey{Name: name, Key: raw}, err
}

// ParseSecret reads a secret key, NAME:BASE64; its public half must be the
// one its bytes hold (a key cut and pasted wrong is an error, not a key
// whose signatures nobody can check).
func ParseSecret(s string) (SecretKey, error) {
	name, raw, err := split(s, ed25519.PrivateKeySize, "secret key")
	if err != nil {
		return SecretKey{}, err
	}
	priv := ed25519.PrivateKey(raw)
	if !bytes.Equal(ed25519.NewKeyFromSeed(priv.Seed()), priv) {
		return SecretKey{}, fmt.Errorf("secret key %q: its bytes are not an ed25519 key pair", name)
	}
	return SecretKey{Name: name, Key: priv}, nil
}

// Sign signs msg: NAME:BASE64.
func (k SecretKey) Sign(msg []byte) string {
	return k.Name + ":" + base64.StdEncoding.EncodeToString(ed25519.Sign(k.Key, msg))
}

// Errors of Verify, each said in one line by its caller.
var (
	ErrUnsigned   = errors.New("it is not signed")
	ErrUnknownKey = errors.New("it is signed only by keys not in [stash] trusted_keys")
	ErrBadSig     = errors.New("its signature does not match its contents")
	ErrNoTrust    = errors.New("no key is trusted ([stash] trusted_keys is empty)")
)

// Verify checks that one of sigs (NAME:BASE64 each) is a good signature
// of msg by a key in trusted, and returns that key's name. A signature
// that cannot be read, or by a key not trusted, is passed over; a bad
// one by a trusted key's name is an error only when no other signature is
// good (a fleet rotating keys may sign with several).
func Verify(msg []byte, sigs []string, trusted []PublicKey) (string, error) {
	if len(trusted) == 0 {
		return "", ErrNoTrust
	}
	if len(sigs) == 0 {
		return "", ErrUnsigned
	}
	var names []string
	bad := false
	for _, s := range sigs {
		name, raw, err := split(s, ed25519.SignatureSize, "signature")
		if err != nil {
			continue
		}
		names = append(names, name)
		for _, k := range trusted {
			if k.Name != name {
				continue
			}
			if ed25519.Verify(k.Key, msg, raw) {
				return name, nil
			}
			bad = true
		}
	}
	switch {
	case bad:
		return "", ErrBadSig
	case len(names) == 0:
		return "", ErrUnsigned
	}
	return "", fmt.Errorf("%w (signed by %s)", ErrUnknownKey, strings.Join(names, ", "))
}

// ParseTrusted reads the manifest's list of trusted public keys.
func ParseTrusted(keys []string) ([]PublicKey, error) {
	var out []PublicKey
	for _, s := range keys {
		k, err := ParsePublic(s)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// maxKeyFile bounds a key file: one line.
const maxKeyFile = 4 << 10

// ReadSecretFile reads the secret key in the file at path, which must be
// a regular file of this user's that no one else can read or write: a
// secret key others can read signs for them too.
func ReadSecretFile(path string) (SecretKey, error) {
	f, fi, err := state.OpenRegularStat(path, false)
	if err != nil {
		return SecretKey{}, err
	}
	defer f.Close()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return SecretKey{}, fmt.Errorf("secret key %s %w (uid %d)", path, state.ErrNotOwned, st.Uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return SecretKey{}, fmt.Errorf("secret key %s is mode %04o: others can read it; chmod 600 %s, or make a new key if it was shared", path, fi.Mode().Perm(), path)
	}
	data, err := state.ReadRegular(path, maxKeyFile, false)
	if err != nil {
		return SecretKey{}, err
	}
	return ParseSecret(string(data))
}

// WriteSecretFile writes k to a new file at path, mode 0600. An existing
// file is never replaced: a key that signed entries stays.
func WriteSecretFile(path string, k SecretKey) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: guard never replaces a key (remove it first if you mean to)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(k.String() + "\n"); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
