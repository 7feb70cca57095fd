package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/sign"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/guard/units"
	"github.com/sandbox-guard/guard/manifest"
)

// StashState is a build recipe's part of the stash (docs/stash.md): its
// entries, their bytes, and whether one matches the recipe's key now, so
// that a heal would restore it instead of building.
type StashState struct {
	Entries int   `json:"entries"`
	Bytes   int64 `json:"bytes"`
	Matches bool  `json:"matches"`
	// Sources are the recipe's stash_from, each with what it last
	// answered a restore ("never asked" before the first).
	Sources []SourceState `json:"sources,omitempty"`
	// PushTo is the recipe's stash_to and the last line of the last
	// background push ("" before the first).
	PushTo   string `json:"push_to,omitempty"`
	LastPush string `json:"last_push,omitempty"`
	// NotPushed is the entry whose stash_to push has not been made yet
	// (it failed, or still runs): a heal that restores the recipe, or
	// guard heal, starts it again.
	NotPushed *stash.PendingPush `json:"not_pushed,omitempty"`
}

// SourceState is a stash source and its last answer.
type SourceState struct {
	URL string `json:"url"`
	stash.SourceResult
}

// stashState reads rec's entries; the key is computed only when there is
// one to match (it runs git and the compilers).
func stashState(e *guard.Engine, items []stash.Item, rec *manifest.Build) StashState {
	var st StashState
	if len(rec.StashFrom) > 0 {
		answers := e.Stash().Sources()
		for _, src := range rec.StashFrom {
			src = stash.Redact(src) // a password in a URL is never shown
			r, ok := answers[src]
			if !ok {
				r = stash.SourceResult{Result: stash.AnswerNeverAsked}
			}
			st.Sources = append(st.Sources, SourceState{URL: src, SourceResult: r})
		}
	}
	if rec.StashTo != "" {
		st.PushTo = rec.StashTo
		st.LastPush = lastLine(e.Stash().PushLog(rec.Name))
		if p, ok := e.Stash().Pending(rec.Name); ok {
			st.NotPushed = &p
		}
	}
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

// lastLine is the last line of the small file at path, or "".
func lastLine(path string) string {
	data, err := state.ReadRegular(path, 64<<10, true)
	if err != nil {
		return ""
	}
	return units.LastLine(data)
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
	fmt.Fprintf(out, "%s, %s of %s, in %s\n", units.Count(len(r.Entries), "entry", "entries"), units.Bytes(total), units.Bytes(r.MaxBytes), store.Dir)
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// StashExport is `guard stash export DIR`: the stash's entries, checked
// and signed by the stash's secret key, into DIR with an index, for other
// machines' stash_from (docs/stash.md, "Signed entries").
func StashExport(e *guard.Engine, out io.Writer, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	key, err := secretKey(e)
	if err != nil {
		return err
	}
	n, err := e.Stash().Export(abs, key)
	if err != nil {
		return fmt.Errorf("cannot export the stash to %s: %w", abs, err)
	}
	fmt.Fprintf(out, "exported %s to %s, signed by %s\nother machines restore from it with stash_from = [%q] in their [builds.NAME]\nand trusted_keys = [%q] in their [stash]\n",
		units.Count(n, "stash entry", "stash entries"), abs, key.Name, "file://"+abs, key.Public().String())
	return nil
}

// secretKey reads the key that signs what leaves this machine.
func secretKey(e *guard.Engine) (sign.SecretKey, error) {
	keyFile := e.StashSecretKey()
	key, err := sign.ReadSecretFile(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return key, fmt.Errorf("no secret key at %s to sign the entries with (other machines use only signed ones): make one with guard stash keygen", keyFile)
	}
	if err != nil {
		return key, fmt.Errorf("cannot read the secret key: %w", err)
	}
	return key, nil
}

// PushOne is what `guard stash push --entry KEY [--lease ID]` pushes: the
// one entry of KEY, and the fleet's lease it lets go of once pushed
// (docs/fleet-lease.md).
type PushOne struct {
	Entry, Lease string
}

// StashPush is `guard stash push [--entry KEY] [BUILD…] oci://HOST/REPO`:
// the local entries of the recipes named (all without a name; only the
// one of KEY with --entry), each signed, to a registry
// (docs/registry.md).
func StashPush(e *guard.Engine, out io.Writer, recipes []string, one PushOne, dest string) error {
	entry := one.Entry
	if entry != "" && len(recipes) != 1 {
		return errors.New("stash push --entry KEY names one build: guard stash push --entry KEY BUILD oci://HOST/REPO")
	}
	letGo := func(bool) {}
	if one.Lease != "" {
		letGo = e.PublishUnderLease(recipes[0], entry, dest, one.Lease)
	}
	key, err := secretKey(e)
	if err != nil {
		letGo(false)
		return err
	}
	store := e.Stash()
	ctx := context.Background()
	if entry != "" {
		err := store.PushEntry(ctx, e.Registry(), dest, recipes[0], entry, key)
		letGo(err == nil)
		if errors.Is(err, stash.ErrNoEntry) {
			// Evicted from the local stash since: nothing is left to
			// push, and nothing waits any more.
			store.ClearPending(recipes[0], entry, dest)
			return fmt.Errorf("cannot push the entry %.12s of %s to %s: it is no longer in the local stash; the next good build pushes its own", entry, recipes[0], dest)
		}
		if err != nil {
			e.Event(heallog.Event{Level: "warn", Event: heallog.StashPush, Tool: recipes[0], Target: dest, Result: "failed", Reason: oneLine(err.Error())})
			return fmt.Errorf("cannot push the entry %.12s of %s to %s: %w; guard heal tries again", entry, recipes[0], dest, err)
		}
		store.ClearPending(recipes[0], entry, dest)
		e.Event(heallog.Event{Event: heallog.StashPush, Tool: recipes[0], Target: dest, Result: "ok", Reason: "entry " + entry[:min(len(entry), 12)]})
		fmt.Fprintf(out, "pushed the entry %.12s of %s to %s, signed by %s\n", entry, recipes[0], dest, key.Name)
		return nil
	}
	n, err := store.Push(ctx, e.Registry(), dest, recipes, key)
	if err != nil {
		e.Event(heallog.Event{Level: "warn", Event: heallog.StashPush, Target: dest, Result: "failed", Reason: oneLine(err.Error())})
		return fmt.Errorf("cannot push to %s (%d pushed): %w", dest, n, err)
	}
	// Every local entry of the recipes went: a push that waited for one
	// of them is made.
	if items, err := store.List(); err == nil {
		for _, it := range items {
			if len(recipes) == 0 || slices.Contains(recipes, it.Recipe) {
				store.ClearPending(it.Recipe, it.Key, dest)
			}
		}
	}
	e.Event(heallog.Event{Event: heallog.StashPush, Target: dest, Result: "ok", Reason: units.Count(n, "entry", "entries")})
	fmt.Fprintf(out, "pushed %d %s to %s, signed by %s\nother machines restore from it with stash_from = [%q] in their [builds.NAME]\nand trusted_keys = [%q] in their [stash]\n",
		n, plural(n, "stash entry", "stash entries"), dest, key.Name, dest, key.Public().String())
	return nil
}

// StashListRemoteReport is `guard stash list --json oci://…`.
type StashListRemoteReport struct {
	Registry string        `json:"registry"`
	Entries  []RemoteEntry `json:"entries"`
}

// RemoteEntry is one entry of a registry and whether it matches its
// recipe here now.
type RemoteEntry struct {
	stash.RemoteEntry
	Matches bool `json:"matches"`
	// Differs names what differs from the key here when it does not
	// match: "source", "compiler" (the rest of the key is not readable).
	Differs []string `json:"differs,omitempty"`
}

// StashListRemote is `guard stash list oci://HOST/REPO`: the entries a
// registry holds, and for each whether it matches its recipe here now,
// and when not, what differs. A registry is a remote party: its entries
// are checked as a restore checks them (a signer is named only once its
// signature verified, a match only on the signed key), against the
// trusted keys and this machine's own (the key it pushes with), and every
// string it sent is made printable before it reaches the terminal.
func StashListRemote(e *guard.Engine, out io.Writer, src string, asJSON bool) error {
	store := *e.Stash() // a copy: the engine's own keeps its trusted keys
	if own, err := secretKey(e); err == nil {
		store.Trusted = append(slices.Clip(store.Trusted), own.Public())
	}
	entries, err := store.ListRegistry(context.Background(), e.Registry(), src)
	// A repository nothing was pushed to yet is an empty list, said so.
	nothing := errors.Is(err, registry.ErrNothingPushed)
	if err != nil && !nothing {
		return fmt.Errorf("cannot list %s: %w", src, err)
	}
	r := StashListRemoteReport{Registry: src, Entries: []RemoteEntry{}}
	keys := map[string]*stash.Key{}
	for _, en := range entries {
		re := RemoteEntry{RemoteEntry: en}
		if en.Unusable != "" {
			re.Differs = []string{en.Unusable}
			r.Entries = append(r.Entries, re)
			continue
		}
		k, ok := keys[en.Recipe]
		if !ok {
			if rec := e.Config().M.Build(en.Recipe); rec != nil {
				if key, err := e.StashKey(context.Background(), rec); err == nil {
					k = &key
				}
			}
			keys[en.Recipe] = k
		}
		switch {
		case k == nil:
			re.Differs = []string{"no such recipe here"}
		case k.Sum == en.Key:
			re.Matches = true
		default:
			if k.Source != en.Source {
				re.Differs = append(re.Differs, "source "+en.Source+" (here "+k.Source+")")
			}
			if k.Compiler != en.Compiler {
				re.Differs = append(re.Differs, "compiler "+en.Compiler+" (here "+k.Compiler+")")
			}
			if len(re.Differs) == 0 {
				re.Differs = []string{"steps, environment or CPU (guard stash key shows them)"}
			}
		}
		r.Entries = append(r.Entries, re)
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	if nothing {
		fmt.Fprintf(out, "nothing pushed yet to %s\n", printable(src))
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECIPE\tKEY\tBYTES\tCREATED\tSIGNED BY\tMATCHES NOW")
	for _, en := range r.Entries {
		signed := strings.Join(en.SignedBy, ",")
		if signed == "" {
			signed = "none verified"
		}
		match := yesNo(en.Matches)
		if !en.Matches {
			match += ": " + strings.Join(en.Differs, "; ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", printable(en.Recipe), printable(fmt.Sprintf("%.12s", en.Key)), en.Bytes, en.Created.Local().Format(time.DateTime), printable(signed), printable(match))
	}
	tw.Flush()
	fmt.Fprintf(out, "%d %s in %s\n", len(r.Entries), plural(len(r.Entries), "entry", "entries"), src)
	return nil
}

// StashKeygen is `guard stash keygen [NAME]`: a new key pair to sign the
// entries a fleet shares. The secret key goes to a new file, mode 0600
// (an existing one is never replaced); the public key is printed, with
// the manifest line that trusts it, and written beside it as NAME.pub.
func StashKeygen(e *guard.Engine, out io.Writer, name string) error {
	if name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "guard"
		}
		name = host + "-1"
	}
	key, err := sign.Generate(name)
	if err != nil {
		return err
	}
	file := e.StashSecretKey()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	if err := sign.WriteSecretFile(file, key); err != nil {
		return err
	}
	pub := strings.TrimSuffix(file, filepath.Ext(file)) + ".pub"
	if err := state.Replace(pub, []byte(key.Public().String()+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "secret key: %s (keep it on the machines that export; mode 0600)\npublic key: %s\ntrust it on every machine of the fleet, in the manifest:\n\n[stash]\ntrusted_keys = [%q]\n",
		file, pub, key.Public().String())
	return nil
}

// StashKeyReport is `guard stash key BUILD --json`.
type StashKeyReport struct {
	Recipe string        `json:"recipe"`
	Key    string        `json:"key"`
	Inputs []stash.Input `json:"inputs"`
	// Entry says whether the local stash has an entry of this key.
	Entry bool `json:"entry"`
}

// StashKey is `guard stash key BUILD`: the key a build of the recipe would
// be stashed under now, and every input it was made of (docs/stash.md,
// "The key"), so that a miss can be explained: run it where the entry was
// made and where it is missed, and compare.
func StashKey(e *guard.Engine, out io.Writer, name string, asJSON bool) error {
	rec := e.Config().M.Build(name)
	if rec == nil {
		return fmt.Errorf("no build recipe %q in the manifest ([builds.NAME])", name)
	}
	key, err := e.StashKey(context.Background(), rec)
	if err != nil {
		return fmt.Errorf("cannot compute the key of %s: %w", name, err)
	}
	items, _ := e.Stash().List()
	r := StashKeyReport{Recipe: name, Key: key.Sum, Inputs: key.Inputs, Entry: matching(items, name, key.Sum)}
	if r.Inputs == nil {
		r.Inputs = []stash.Input{}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(out, "%s key %s (a local entry matches: %s)\n", name, key.Sum, yesNo(r.Entry))
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, in := range key.Inputs {
		fmt.Fprintf(tw, "  %s\t%s\n", in.Name, in.Value)
	}
	return tw.Flush()
}
