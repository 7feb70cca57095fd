package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandbox-guard/guard/guard/state"
)

// decoded is the decoded-manifest file: the manifest and what it was
// decoded from.
type decoded struct {
	Key      string    `json:"key"`
	Manifest *Manifest `json:"manifest"`
}

// maxDecodedBytes bounds the decoded manifest: a JSON of a MaxBytes
// manifest is larger than its TOML, never this large.
const maxDecodedBytes = 8 * MaxBytes

// LoadDecoded is Load for the hot path. Decoding TOML costs a fresh guard
// process one to two milliseconds, more than everything else a healthy shim
// call does; a manifest that decoded and validated once is kept in
// stateDir as JSON, which decodes several times faster, keyed by the
// source file's path, size, mtime and inode, the home folder and guard's
// own executable (a new guard may read the manifest differently). Anything
// off (no decoded file, a stale key, an unreadable file) falls back to Load,
// and the decoded file is written again, best effort: it never decides the
// outcome.
func LoadDecoded(path, home, stateDir string) (*Manifest, error) {
	asked := path
	explicit := path != ""
	if path == "" {
		path = UserPath(home)
	}
	key, ok := decodedKey(path, home, explicit)
	if !ok || stateDir == "" {
		return Load(asked, home)
	}
	file := state.Layout{Dir: stateDir}.DecodedManifest()
	if data, err := state.ReadRegular(file, maxDecodedBytes, true); err == nil {
		var c decoded
		if json.Unmarshal(data, &c) == nil && c.Key == key && c.Manifest != nil {
			return c.Manifest, nil
		}
	}
	m, err := Load(asked, home)
	if err != nil {
		return nil, err
	}
	writeDecoded(file, key, m)
	return m, nil
}

// decodedKey names what a decode depends on; ok is false when the source
// cannot be identified (then nothing is kept).
func decodedKey(path, home string, explicit bool) (string, bool) {
	self, ok := fileKey("/proc/self/exe")
	if !ok {
		return "", false
	}
	src, ok := fileKey(path)
	if !ok {
		if explicit {
			return "", false // Load reports the missing file
		}
		src = fmt.Sprintf("embedded:%d:%08x", len(defaultTOML), crc32.ChecksumIEEE(defaultTOML))
	}
	return fmt.Sprintf("v1|%s|%s|%s|%s", self, path, src, home), true
}

func fileKey(path string) (string, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", false
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec), true
}

func writeDecoded(file, key string, m *Manifest) {
	data, err := json.Marshal(decoded{Key: key, Manifest: m})
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	_ = state.Replace(file, data, 0o600)
}
