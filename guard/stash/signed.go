package stash

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sandbox-guard/guard/guard/sign"
)

// An entry from a shared source is code every machine of a fleet runs, so
// it is used only when a trusted key signed it (docs/stash.md, "Signed
// entries"). A signature covers the entry's header: its recipe, its key
// and every file's path, mode, size and sha256 (or link target), and each
// file's bytes are checked against that sha256 before any is placed, so a
// signature cannot be moved onto other files. A source keeps an entry's
// signatures beside it, one NAME:BASE64 a line, in NAME.sig.

// errUntrusted marks an entry of a shared source that no trusted key
// signed: it is refused before a byte of it is placed or kept.
var errUntrusted = errors.New("refused as untrusted")

// maxSigFile bounds a signature file: a few lines.
const maxSigFile = 16 << 10

// sigName is the file of an entry's signatures in a source.
func sigName(it Item) string { return strings.TrimSuffix(it.Name(), ".gst") + ".sig" }

// signedMessage is what a signature of an entry signs: its header, after
// a line that keeps a stash signature from meaning anything else.
func signedMessage(data []byte) ([]byte, error) {
	_, off, err := parseEntry(data)
	if err != nil {
		return nil, err
	}
	return append([]byte("guard-stash-signature 1\n"), data[:off]...), nil
}

// Sign returns the signature of the entry data by k.
func Sign(data []byte, k sign.SecretKey) (string, error) {
	msg, err := signedMessage(data)
	if err != nil {
		return "", err
	}
	return k.Sign(msg), nil
}

// verifyEntry checks that one of sigs is a good signature of the entry
// data by a key in trusted and returns that key's name.
func verifyEntry(data []byte, sigs []string, trusted []sign.PublicKey) (string, error) {
	msg, err := signedMessage(data)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errDamaged, err)
	}
	return sign.Verify(msg, sigs, trusted)
}

// parseSigs reads a signature file: one signature a line.
func parseSigs(data []byte) []string {
	var sigs []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			sigs = append(sigs, line)
		}
	}
	return sigs
}

// namesTrusted reports whether one of sigs names a trusted key: what can
// be known before the entry is fetched.
func namesTrusted(sigs []string, trusted []sign.PublicKey) bool {
	for _, s := range sigs {
		name, _, _ := strings.Cut(s, ":")
		if slices.ContainsFunc(trusted, func(k sign.PublicKey) bool { return k.Name == name }) {
			return true
		}
	}
	return false
}
