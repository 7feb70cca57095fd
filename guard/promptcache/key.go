package promptcache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"strings"
	"syscall"
)

// keyDomain separates our hashes from any other sha256 use of the same bytes.
const keyDomain = "guard prompt cache\x00"

// KeyInput is everything that decides what a llama call prints. Two calls with
// equal inputs are expected to print the same bytes (greedy sampling).
type KeyInput struct {
	Tool     string   // "llama-completion"
	ModelID  string   // pinned sha256, else "size:mtime:inode" (see ModelID)
	Args     []string // normalised args of the first attempt, model path replaced by ModelID
	FileText []byte   // contents of a -f prompt file, nil if none
}

// Key returns the hex sha256 of the input. Every field is length-prefixed so
// that no two different inputs share an encoding: ["a b"] != ["a", "b"], and
// a nil FileText differs from an empty one.
func Key(in KeyInput) string { return keyFor(FormatVersion, in) }

func keyFor(version uint64, in KeyInput) string {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(keyDomain))
	binary.BigEndian.PutUint64(n[:], version)
	h.Write(n[:])
	writeField(h, []byte(in.Tool))
	writeField(h, []byte(in.ModelID))
	binary.BigEndian.PutUint64(n[:], uint64(len(in.Args)))
	h.Write(n[:])
	for _, a := range in.Args {
		writeField(h, []byte(a))
	}
	if in.FileText == nil {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
		writeField(h, in.FileText)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// ModelID names a model file for the key. A pinned sha256 is the true
// identity; without one, size, mtime (ns) and inode from a single stat stand in
// for it, so a re-downloaded or edited model gets fresh keys without hashing
// gigabytes on every call.
func ModelID(path, pinnedSHA256 string) (string, error) {
	if p := strings.TrimSpace(pinnedSHA256); p != "" {
		return strings.ToLower(p), nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("stat model: %w", err)
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%d:%d:%d", fi.Size(), fi.ModTime().UnixNano(), ino), nil
}

// validKey accepts only what Key produces, so a key can never name a path
// outside Dir or one of our own bookkeeping files.
func validKey(key string) bool {
	if len(key) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
