// Package stash keeps what a build made, so that a build done once comes
// back in a second. Sandboxes evict build/ between sessions; rebuilding
// llama.cpp there takes six minutes on two cores, while its tools and the
// libraries they load are 11 MB that compress to a few. After a good build
// guard keeps those files here (STATE/stash), compressed with zstd, each
// with its sha256, in one entry keyed by what decides the build's result
// (Key: the steps, the source revision, the compilers and the CPU). A heal
// of a missing binary restores a matching entry first and builds only when
// none matches or the restore fails.
//
// Nothing read here is trusted before it is checked: an entry's sha256 is
// the index's before a byte of it is parsed, every file's sha256 is
// checked before any is put in place, reads are bounded (the header, the
// bytes the files claim, the entry's size), and the files are placed all
// or none, through temporary files beside their targets, never through a
// link planted in the build folder (place.go). An entry that fails a check
// is removed and the build runs. The folder itself must be guard's: a
// link, or one another user owns, is refused.
//
// A fleet shares builds through read-only sources: folders (file://, a
// shared volume) and https URLs holding an index and entries, which
// Export writes and signs. An entry of a source is used only when a key
// of Trusted signed it (signed.go), and is kept in the local stash only
// after it passed every check and was put in place.
package stash

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sandbox-guard/guard/guard/elfpath"
	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/sign"
	"github.com/sandbox-guard/guard/guard/state"
)

// DefaultMaxBytes is the bound of a stash when the manifest sets none.
const DefaultMaxBytes = 64 << 20

// Store is the stash kept in one folder.
type Store struct {
	Dir      string // STATE/stash
	MaxBytes int64  // the newest entries are kept within this many bytes; 0 = DefaultMaxBytes
	// Trusted are the keys whose signature makes an entry of a shared
	// source usable ([stash] trusted_keys); none = no shared entry is.
	Trusted []sign.PublicKey
	// Registry reaches the oci:// sources; nil = none is read.
	Registry *registry.Client
}

// readLocal reads the local entry file of it, at most limit bytes.
func (s *Store) readLocal(it Item, limit int64) ([]byte, error) {
	return state.ReadRegular(filepath.Join(s.Dir, it.Name()), limit, true)
}

// ErrNoEntry is Restore's error when no entry matches the key.
var ErrNoEntry = errors.New("no stash entry matches")

// Restored says where a restore came from.
type Restored struct {
	From  string // "stash" or the source's URL
	Bytes int64  // the entry's size
	Files int
}

func (s *Store) maxBytes() int64 { return cmp.Or(s.MaxBytes, DefaultMaxBytes) }

func (s *Store) indexPath() string { return filepath.Join(s.Dir, "index") }

func entryName(recipe, key string) string {
	h := sha256.Sum256([]byte(recipe + "\x00" + key))
	return hex.EncodeToString(h[:16]) + ".gst"
}

// folder makes sure Dir is a folder of this user's, creating it when absent.
func (s *Store) folder(create bool) error {
	fi, err := os.Lstat(s.Dir)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := os.MkdirAll(s.Dir, 0o700); err != nil {
			return fmt.Errorf("create the stash folder: %w", err)
		}
		fi, err = os.Lstat(s.Dir)
	}
	switch {
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("stash folder %s is a symlink; remove it and guard makes a new one", s.Dir)
	case !fi.IsDir():
		return fmt.Errorf("stash folder %s is not a folder; remove it and guard makes a new one", s.Dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("stash folder %s %w (uid %d); remove it or set GUARD_STATE_DIR", s.Dir, state.ErrNotOwned, st.Uid)
	}
	return nil
}

// Has reports whether the stash itself (not a source) holds an entry of
// recipe under key, or any entry of recipe for a key with no Sum. The
// entry is not checked here: Restore checks it.
func (s *Store) Has(recipe string, key Key) bool {
	items, _ := s.List()
	for _, it := range items {
		if it.Recipe == recipe && (key.Sum == "" || it.Key == key.Sum) {
			return true
		}
	}
	return false
}

// List returns the stash's entries, oldest first; an absent stash is empty.
func (s *Store) List() ([]Item, error) {
	if err := s.folder(false); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return s.readIndex()
}

func (s *Store) readIndex() ([]Item, error) {
	data, err := state.ReadRegular(s.indexPath(), maxIndex, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the stash index: %w", err)
	}
	items, err := parseIndex(data)
	if err != nil {
		return nil, fmt.Errorf("read the stash index %s: %w", s.indexPath(), err)
	}
	return items, nil
}

// update changes the index under the stash's lock: edit gets the entries
// and returns those to keep, and every other entry file is removed (those
// of a damaged index too, so that the bound holds).
func (s *Store) update(ctx context.Context, edit func([]Item) ([]Item, error)) error {
	if err := s.folder(true); err != nil {
		return err
	}
	held, err := lock.Acquire(ctx, filepath.Join(s.Dir, "index.lock"), nil)
	if err != nil {
		return fmt.Errorf("lock the stash: %w", err)
	}
	defer held.Release()
	items, err := s.readIndex()
	if err != nil {
		items = nil // a damaged index is written anew; its entries go with it
	}
	keep, err := edit(items)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, it := range keep {
		kept[it.Name()] = true
	}
	if err := state.Replace(s.indexPath(), encodeIndex(keep), 0o600); err != nil {
		return err
	}
	names, _ := os.ReadDir(s.Dir)
	for _, d := range names {
		if strings.HasSuffix(d.Name(), ".gst") && !kept[d.Name()] {
			_ = syscall.Unlink(filepath.Join(s.Dir, d.Name()))
		}
	}
	return nil
}

// put stores an entry's bytes and evicts the oldest entries past the bound.
func (s *Store) put(ctx context.Context, it Item, data []byte) error {
	return s.update(ctx, func(items []Item) ([]Item, error) {
		if err := state.Replace(filepath.Join(s.Dir, it.Name()), data, 0o600); err != nil {
			return nil, err
		}
		items = slices.DeleteFunc(items, func(x Item) bool { return x.Recipe == it.Recipe && x.Key == it.Key })
		return evict(append(items, it), s.maxBytes()), nil
	})
}

// evict keeps the newest entries whose sizes add up to at most limit, in
// the order they were created.
func evict(items []Item, limit int64) []Item {
	slices.SortStableFunc(items, func(a, b Item) int { return a.Created.Compare(b.Created) })
	var total int64
	start := len(items)
	for start > 0 && total+items[start-1].Size <= limit {
		total += items[start-1].Size
		start--
	}
	return items[start:]
}

// drop removes a local entry that failed a check.
func (s *Store) drop(it Item) {
	_ = s.update(context.Background(), func(items []Item) ([]Item, error) {
		return slices.DeleteFunc(items, func(x Item) bool { return x.Name() == it.Name() }), nil
	})
	_ = syscall.Unlink(filepath.Join(s.Dir, it.Name()))
}

// Save keeps the files at paths that are in root's output folders (a
// symlink is kept as one, with the file it names; the others, a system
// library, are left out) as the entry of recipe for key, and evicts the
// oldest entries past the bound.
func (s *Store) Save(ctx context.Context, recipe string, key Key, root string, outputs, paths []string) (Item, error) {
	it, err := s.save(ctx, recipe, key, root, outputs, paths)
	if errors.Is(err, errOverBound) {
		// The bound holds even when no new entry fits in it ([stash]
		// max_bytes lowered below what is kept): the oldest entries past
		// it go now, not at a save that may never come.
		_ = s.update(ctx, func(items []Item) ([]Item, error) { return evict(items, s.maxBytes()), nil })
	}
	return it, err
}

// errOverBound is Save's error for an entry larger than the stash's bound.
var errOverBound = errors.New("over the stash's bound")

func (s *Store) save(ctx context.Context, recipe string, key Key, root string, outputs, paths []string) (Item, error) {
	h := &header{Recipe: recipe, Key: key.Sum, Source: key.Source, Compiler: key.Compiler}
	files, err := collect(root, outputs, paths)
	if err != nil {
		return Item{}, err
	}
	// Bounded as a restore bounds it: the files' bytes by maxUnpacked
	// (from their sizes, before a byte is read: a huge sparse file costs
	// nothing), the entry by the stash's bound (as it is written).
	body := &boundedBuffer{limit: s.maxBytes()}
	zw, err := zstd.NewWriter(body, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		return Item{}, err
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return Item{}, err
	}
	var total int64
	var pinned []string
	for _, f := range files {
		if !f.IsLink() {
			var kept []string
			if f.Size, f.SHA256, kept, err = copyFile(zw, filepath.Join(root, filepath.FromSlash(f.Path)), maxUnpacked-total, relocator(root, real, f.Path, outputs)); err != nil {
				zw.Close()
				return Item{}, err
			}
			total += f.Size
			for _, k := range kept {
				pinned = append(pinned, f.Path+" keeps its "+k)
			}
		}
		h.Files = append(h.Files, f)
	}
	if err := zw.Close(); err != nil {
		return Item{}, err
	}
	data := append(h.encode(), body.Bytes()...)
	if int64(len(data)) > s.maxBytes() {
		return Item{}, fmt.Errorf("the entry is %d bytes, %w of %d ([stash] max_bytes)", len(data), errOverBound, s.maxBytes())
	}
	sum := sha256.Sum256(data)
	it := Item{Recipe: recipe, Key: key.Sum, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Created: time.Now(), Pinned: pinned}
	return it, s.put(ctx, it, data)
}

// relocator is elfpath's origin for the file at rel (below root, whose
// real path is real): an absolute folder of its RUNPATH or RPATH that is
// in the outputs becomes $ORIGIN-relative, so that the entry answers at
// any checkout path (docs/stash.md, "Another checkout path"); one in the
// checkout but outside the outputs cannot move, and says why.
func relocator(root, real, rel string, outputs []string) func(string) (string, string) {
	return func(dir string) (string, string) {
		in, ok := relBelow(filepath.Clean(dir), root, real)
		if !ok {
			return "", "" // outside the checkout (a system or SDK folder): the same on every machine or not, as before
		}
		if !underOutputs(in, outputs) && !slices.ContainsFunc(outputs, func(o string) bool { return path.Clean(o) == in }) {
			return "", "it is in the checkout but outside the output folders, which the entry does not hold"
		}
		up, err := filepath.Rel(path.Dir(rel), in)
		if err != nil {
			return "", ""
		}
		if up == "." {
			return "$ORIGIN", ""
		}
		return "$ORIGIN/" + filepath.ToSlash(up), ""
	}
}

// collect lists the files to keep: each path, and for a symlink the file
// it names, which must stay in an output folder.
func collect(root string, outputs, paths []string) ([]File, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	var queue []string
	for _, p := range paths {
		if rel, ok := relBelow(p, root, real); ok && underOutputs(rel, outputs) {
			queue = append(queue, rel)
		}
	}
	if len(queue) == 0 {
		return nil, fmt.Errorf("none of %s is in an output folder of %s", strings.Join(paths, ", "), root)
	}
	var files []File
	seen := map[string]bool{}
	for len(queue) > 0 && len(files) < maxFiles {
		rel := queue[0]
		queue = queue[1:]
		if seen[rel] {
			continue
		}
		seen[rel] = true
		full := filepath.Join(root, filepath.FromSlash(rel))
		fi, err := os.Lstat(full)
		if err != nil {
			return nil, err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(full)
			if err != nil {
				return nil, err
			}
			to := path.Join(path.Dir(rel), target)
			if !linkStaysIn(File{Path: rel, Link: target}, outputs) {
				return nil, fmt.Errorf("%s links out of the output folders (to %s)", full, target)
			}
			files = append(files, File{Path: rel, Link: target})
			queue = append(queue, to)
		case fi.Mode().IsRegular():
			files = append(files, File{Path: rel, Mode: fi.Mode().Perm()})
		default:
			return nil, fmt.Errorf("%s is not a regular file", full)
		}
	}
	// Targets before the links that name them, the libraries before the
	// binaries: a restore puts them in place in this order.
	slices.Reverse(files)
	return files, nil
}

// relBelow is p relative to root (or to root's real path), slash separated.
func relBelow(p, root, real string) (string, bool) {
	for _, r := range []string{root, real} {
		if rel, err := filepath.Rel(r, p); err == nil && checkPath(filepath.ToSlash(rel)) == nil {
			return filepath.ToSlash(rel), true
		}
	}
	return "", false
}

// copyFile writes the regular file at p, at most limit bytes long, to w and
// returns its size and sha256. An ELF file's absolute RUNPATH and RPATH
// folders that origin maps are rewritten on the way (elfpath), so the
// sha256, and the signature over it, are of the rewritten bytes; kept says
// which stay absolute though they name the checkout, and why.
func copyFile(w io.Writer, p string, limit int64, origin func(string) (string, string)) (n int64, sum string, kept []string, err error) {
	f, fi, err := state.OpenRegularStat(p, true)
	if err != nil {
		return 0, "", nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return 0, "", nil, fmt.Errorf("%s is %d bytes: the entry's files would claim more than %d", p, fi.Size(), int64(maxUnpacked))
	}
	var src io.Reader = f
	if origin != nil {
		// A file that does not parse is kept as it is: it was healthy
		// enough to be stashed, and the rewrite is an improvement only.
		if plan, err := elfpath.Plan(f, origin); err == nil {
			src, kept = elfpath.Apply(f, plan.Patches), plan.Kept
		}
	}
	h := sha256.New()
	n, err = io.Copy(io.MultiWriter(w, h), io.LimitReader(src, limit+1))
	if err != nil {
		return 0, "", nil, fmt.Errorf("copy %s: %w", p, err)
	}
	if n > limit {
		return 0, "", nil, fmt.Errorf("%s grew past %d bytes while it was read", p, limit)
	}
	return n, hex.EncodeToString(h.Sum(nil)), kept, nil
}

// boundedBuffer is a bytes.Buffer that refuses to grow past limit: a Save
// over the stash's bound ends there, holding no more than it in memory.
type boundedBuffer struct {
	bytes.Buffer
	limit int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if int64(b.Len()+len(p)) > b.limit {
		return 0, fmt.Errorf("the entry is %w of %d bytes ([stash] max_bytes)", errOverBound, b.limit)
	}
	return b.Buffer.Write(p)
}

// Restore puts the entry of recipe for key in place below root: the local
// stash's first, else the first source's that has one. It returns
// ErrNoEntry (wrapped) when none has one, another error when an entry was
// found and could not be used (it is removed from the local stash).
// The caller holds the recipe's build lock: a restore removes the
// temporary files one killed before its end left in the build folder.
func (s *Store) Restore(ctx context.Context, recipe string, key Key, root string, outputs, sources []string) (Restored, error) {
	var failed []error
	items, err := s.List()
	if err != nil {
		failed = append(failed, err)
	}
	for _, it := range items {
		if it.Recipe != recipe || it.Key != key.Sum {
			continue
		}
		data, err := readEntry(it, func(limit int64) ([]byte, error) { return s.readLocal(it, limit) })
		if err != nil {
			err = fmt.Errorf("%w: %w", errDamaged, err)
		} else {
			var n int
			if n, err = unpack(data, recipe, key.Sum, root, outputs); err == nil {
				return Restored{From: "stash", Bytes: it.Size, Files: n}, nil
			}
		}
		if !errors.Is(err, errDamaged) {
			failed = append(failed, err) // the build folder's fault, not the entry's: it stays
			continue
		}
		s.drop(it)
		failed = append(failed, fmt.Errorf("stash entry %s refused and removed: %w", it.Name(), err))
	}
	answers := map[string]SourceResult{}
	defer func() { s.noteSources(answers) }()
	for _, src := range sources {
		it, data, err := s.fromSource(ctx, src, recipe, key.Sum)
		if err == nil {
			var n int
			if n, err = unpack(data, recipe, key.Sum, root, outputs); err == nil {
				answers[src] = sourceResult(nil)
				_ = s.put(ctx, it, data) // the next restore is local
				return Restored{From: src, Bytes: it.Size, Files: n}, nil
			}
		}
		answers[src] = sourceResult(err)
		if errors.Is(err, ErrNoEntry) {
			continue
		}
		failed = append(failed, fmt.Errorf("%s: %w", src, err))
	}
	if len(failed) > 0 {
		return Restored{}, errors.Join(failed...)
	}
	return Restored{}, ErrNoEntry
}

// readEntry reads an entry with read (at most its size) and checks its
// sha256 before anything else looks at it.
func readEntry(it Item, read func(limit int64) ([]byte, error)) ([]byte, error) {
	data, err := read(it.Size)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != it.Size {
		return nil, fmt.Errorf("%d bytes where the index says %d", len(data), it.Size)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != it.SHA256 {
		return nil, errors.New("sha256 mismatch")
	}
	return data, nil
}

// unpack checks an entry's header and puts its files in place, all or none.
func unpack(data []byte, recipe, key, root string, outputs []string) (int, error) {
	h, off, err := parseEntry(data)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errDamaged, err)
	}
	if h.Recipe != recipe || h.Key != key {
		return 0, fmt.Errorf("%w: it is recipe %q key %.12s, not the one asked for", errDamaged, h.Recipe, h.Key)
	}
	for _, f := range h.Files {
		if !underOutputs(f.Path, outputs) {
			return 0, fmt.Errorf("%w: %s is not below an output folder", errDamaged, f.Path)
		}
		// As Save refuses to keep one: a link that leaves the outputs
		// would have a later build write through it, outside them.
		if f.IsLink() && !linkStaysIn(f, outputs) {
			return 0, fmt.Errorf("%w: %s links out of the output folders (to %s)", errDamaged, f.Path, f.Link)
		}
	}
	zr, err := zstd.NewReader(bytes.NewReader(data[off:]), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxUnpacked))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errDamaged, err)
	}
	defer zr.Close()
	p := newPlacer(root)
	defer p.close()
	for _, f := range h.Files {
		if err := p.stage(f, zr); err != nil {
			return 0, err
		}
	}
	if n, _ := zr.Read(make([]byte, 1)); n > 0 {
		return 0, fmt.Errorf("%w: bytes past the last file", errDamaged)
	}
	return len(h.Files), p.commit()
}

// linkStaysIn reports whether the link f, resolved from its folder, stays
// in the output folders. Its target must be relative, and climb (..)
// only before it names anything: a ".." after a name would climb from
// wherever that name leads, which may be another link of the entry
// (b -> ., then a -> b/b/../..), so the text alone would not say where
// it ends. Each link of an entry is checked so, and its folder is a real
// one (the placer makes folders, never follows links), so every path
// through the entry's links stays where its text says.
func linkStaysIn(f File, outputs []string) bool {
	if path.IsAbs(f.Link) {
		return false
	}
	named := false
	for _, part := range strings.Split(f.Link, "/") {
		switch {
		case part == "..":
			if named {
				return false
			}
		case part != "" && part != ".":
			named = true
		}
	}
	return underOutputs(path.Join(path.Dir(f.Path), f.Link), outputs)
}

// Export copies every local entry, checked and signed by key, into dir (a
// shared volume, or a folder a web server serves) and merges the local
// index into dir's: the folder is then a source for the machines that
// trust key. It returns how many entries it copied.
func (s *Store) Export(dir string, key sign.SecretKey) (int, error) {
	items, err := s.List()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	theirs, err := readFolderIndex(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	for _, it := range items {
		data, err := readEntry(it, func(limit int64) ([]byte, error) { return s.readLocal(it, limit) })
		if err != nil {
			return 0, fmt.Errorf("stash entry %s: %w", it.Name(), err)
		}
		sig, err := Sign(data, key)
		if err != nil {
			return 0, fmt.Errorf("stash entry %s: %w", it.Name(), err)
		}
		// The signature first: a reader that finds the new entry finds
		// its signature, and one that finds the old entry with the new
		// signature refuses it, as it should.
		if err := state.Replace(filepath.Join(dir, sigName(it)), []byte(sig+"\n"), 0o644); err != nil {
			return 0, err
		}
		if err := state.Replace(filepath.Join(dir, it.Name()), data, 0o644); err != nil {
			return 0, err
		}
		theirs = slices.DeleteFunc(theirs, func(x Item) bool { return x.Name() == it.Name() })
		theirs = append(theirs, it)
	}
	return len(items), state.Replace(filepath.Join(dir, "index"), encodeIndex(theirs), 0o644)
}

func readFolderIndex(dir string) ([]Item, error) {
	data, err := state.ReadRegular(filepath.Join(dir, "index"), maxIndex, false)
	if err != nil {
		return nil, err
	}
	return parseIndex(data)
}
