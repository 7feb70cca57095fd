package promptcache

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/state"
)

// staleTemp is how old a temp file must be before eviction assumes its Put
// died; no live Put takes anywhere near this long.
const staleTemp = time.Hour

type item struct {
	name string
	size int64
	used time.Time // mtime: the last Put or hit
}

// list returns the entry files in Dir and sweeps abandoned temp files.
func (s *Store) list() ([]item, error) {
	des, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	items := make([]item, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if isTemp(name) {
			// Temp files carry real mtimes (Put touches only the final
			// file), so the real clock judges them even under a fake Now.
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
				_ = os.Remove(filepath.Join(s.Dir, name))
			}
			continue
		}
		if !validKey(name) || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		items = append(items, item{name: name, size: fi.Size(), used: fi.ModTime()})
	}
	return items, nil
}

// evict drops entries unused for longer than TTL (last use is never before
// creation, so they are surely expired), then least-recently-used entries
// until the total fits MaxBytes. keep, the entry just written, is never
// dropped. Two processes evicting at once may drop a little more than needed,
// which costs only a future miss.
func (s *Store) evict(keep string) error {
	items, err := s.list()
	if err != nil {
		return fmt.Errorf("evict: %w", err)
	}
	now := s.now()
	var total int64
	live := items[:0]
	for _, it := range items {
		if s.TTL > 0 && it.name != keep && now.Sub(it.used) > s.TTL {
			s.remove(it.name)
			continue
		}
		live = append(live, it)
		total += it.size
	}
	limit := s.maxBytes()
	if total <= limit {
		return nil
	}
	sort.Slice(live, func(i, j int) bool {
		if !live[i].used.Equal(live[j].used) {
			return live[i].used.Before(live[j].used)
		}
		return live[i].name < live[j].name
	})
	for _, it := range live {
		if total <= limit {
			break
		}
		if it.name == keep {
			continue
		}
		s.remove(it.name)
		total -= it.size
	}
	return nil
}

// remove ignores failures: an entry that cannot go now is retried by the
// next eviction, and one already gone is what we wanted.
func (s *Store) remove(name string) { _ = os.Remove(filepath.Join(s.Dir, name)) }

func isTemp(name string) bool { return strings.HasPrefix(name, state.TempPrefix) }
