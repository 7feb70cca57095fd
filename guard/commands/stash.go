package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/manifest"
)

// StashState is a build recipe's part of the stash (docs/stash.md): its
// entries, their bytes, and whether one matches the recipe's key now, so
// that a heal would restore it instead of building.
type StashState struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	Matches bool  `json:"matches"`
}

// stashState reads rec's entries; the key is computed only when there is
// one to match (it runs git and the compilers).
func stashState(e *guard.Engine, items []stash.Item, rec *manifest.Build) StashState {
	var st StashState
	for _, it := range items {
		if it.Recipe == rec.Name {
			st.Entries++
			st.Bytes += it.Size
		}
	}
	if st.Entries > 0 {
		if key, err := e.StashKey(context.Background(), rec); err == nil {
			st.Matches = matching(items, rec.Name, key.Sum)
		}
	}
	return st
}

func matching(items []stash.Item, recipe, key string) bool {
	for _, it := range items {
		if it.Recipe == recipe && it.Key == key {
			return true
		}
	}
	return false
}

// StashEntry is one entry of `guard stash list --json`.
type StashEntry struct {
	stash.Item
	Matches bool `json:"matches"` // its recipe's key now: a heal restores it
}

// StashListReport is `guard stash list --json`.
type StashListReport struct {
	Folder   string       `json:"folder"`
	MaxBytes int64        `json:"max_bytes"`
	Entries  []StashEntry `json:"entries"`
}

// StashList is `guard stash list`: every entry, oldest first, and whether
// it matches its recipe's key now.
func StashList(e *guard.Engine, out io.Writer, asJSON bool) error {
	store := e.Stash()
	items, err := store.List()
	if err != nil {
		return fmt.Errorf("cannot read the stash: %w", err)
	}
	keys := map[string]string{}
	r := StashListReport{Folder: store.Dir, MaxBytes: e.Config().M.Stash.MaxBytes, Entries: []StashEntry{}}
	for _, it := range items {
		if _, ok := keys[it.Recipe]; !ok {
			if rec := e.Config().M.Build(it.Recipe); rec != nil {
				if key, err := e.StashKey(context.Background(), rec); err == nil {
					keys[it.Recipe] = key.Sum
				}
			}
		}
		r.Entries = append(r.Entries, StashEntry{it, keys[it.Recipe] == it.Key})
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tKEY\tBYTES\tCREATED\tMATCHES NOW")
	var total int64
	for _, en := range r.Entries {
		total += en.Size
		fmt.Fprintf(tw, "%s\t%.12s\t%d\t%s\t%s\n", printable(en.Recipe), en.Key, en.Size, en.Created.Local().Format(time.DateTime), yesNo(en.Matches))
	}
	tw.Flush()
	fmt.Fprintf(out, "%d entries, %d of %d bytes, in %s\n", len(r.Entries), total, r.MaxBytes, store.Dir)
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// StashExport is `guard stash export DIR`: the stash's entries, checked,
// into DIR with an index, for other machines' stash_from.
func StashExport(e *guard.Engine, out io.Writer, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	n, err := e.Stash().Export(abs)
	if err != nil {
		return fmt.Errorf("cannot export the stash to %s: %w", abs, err)
	}
	entries := "entries"
	if n == 1 {
		entries = "entry"
	}
	fmt.Fprintf(out, "exported %d stash %s to %s\nother machines restore from it with stash_from = [%q] in their [builds.NAME]\n", n, entries, abs, "file://"+abs)
	return nil
}
