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
)

// CacheFile is the name of the decoded-manifest cache in the cache folder.
const CacheFile = "manifest.json"

// cached is the cache file: the decoded manifest and what it was decoded from.
type cached struct {
	Key      string    `json:"key"`
	Manifest *Manifest `json:"manifest"`
}

// LoadCached is Load for the hot path. Decoding TOML costs a fresh guard
// process one to two milliseconds, more than everything else a healthy shim
// call does; a manifest that decoded and validated once is kept in
// cacheDir as JSON, which decodes several times faster, keyed by the
// source file's path, size, mtime and inode, the home folder and guard's
// own executable (a new guard may read the manifest differently). Anything
// off (no cache, a stale key, an unreadable file) falls back to Load, and
// the cache is written again, best effort: it never decides the outcome.
func LoadCached(path, home, cacheDir string) (*Manifest, error) {
	asked := path
	explicit := path != "" || os.Getenv("GUARD_MANIFEST") != ""
	if path == "" {
		path = UserPath(home)
	}
	key, ok := cacheKey(path, home, explicit)
	if !ok || cacheDir == "" {
		return Load(asked, home)
	}
	file := filepath.Join(cacheDir, CacheFile)
	if data, err := os.ReadFile(file); err == nil {
		var c cached
		if json.Unmarshal(data, &c) == nil && c.Key == key && c.Manifest != nil {
			return c.Manifest, nil
		}
	}
	m, err := Load(asked, home)
	if err != nil {
		return nil, err
	}
	writeCache(file, key, m)
	return m, nil
}

// cacheKey names what a decode depends on; ok is false when the source
// cannot be identified (then nothing is cached).
func cacheKey(path, home string, explicit bool) (string, bool) {
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

func writeCache(file, key string, m *Manifest) {
	data, err := json.Marshal(cached{Key: key, Manifest: m})
	if err != nil {
		return
	}
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return
	}
	tmp, err := os.CreateTemp(dir, ".manifest-*.json")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), file) != nil {
		os.Remove(tmp.Name())
	}
}
