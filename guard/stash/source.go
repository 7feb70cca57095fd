package stash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/sign"
	"github.com/sandbox-guard/guard/guard/state"
	"github.com/sandbox-guard/guard/manifest"
)

// sourceTimeout bounds one read from a source: an entry is a few MB.
const sourceTimeout = 2 * time.Minute

// fromSource finds the entry of recipe for key in a source (a file:// folder
// or an https URL that Export's layout is served from) and reads it,
// checked against the source's index and signed by a key in trusted; ErrNoEntry
// when it has none. The signature file is read before the entry: an entry
// no trusted key signed is refused without a byte of it fetched.
func (s *Store) fromSource(ctx context.Context, src, recipe, key string) (Item, []byte, error) {
	if registry.IsRef(src) {
		return s.fromRegistry(ctx, src, recipe, key)
	}
	u, err := url.Parse(src)
	if err != nil {
		return Item{}, nil, err
	}
	get := func(name string, limit int64) ([]byte, error) {
		if u.Scheme != "file" {
			return httpGet(ctx, strings.TrimSuffix(src, "/")+"/"+name, limit)
		}
		data, err := state.ReadRegular(filepath.Join(u.Path, name), limit, false)
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNoEntry, err) // a folder nothing was exported to yet
		}
		return data, err
	}
	data, err := get("index", maxIndex)
	if err != nil {
		return Item{}, nil, fmt.Errorf("read its index: %w", err)
	}
	items, err := parseIndex(data)
	if err != nil {
		return Item{}, nil, err
	}
	for _, it := range items {
		if it.Recipe != recipe || it.Key != key {
			continue
		}
		if it.Size > s.maxBytes() {
			return Item{}, nil, fmt.Errorf("its entry claims %d bytes, over the stash's bound of %d", it.Size, s.maxBytes())
		}
		if len(s.Trusted) == 0 {
			return Item{}, nil, fmt.Errorf("entry %s %w: %w", it.Name(), errUntrusted, sign.ErrNoTrust)
		}
		sigData, err := get(sigName(it), maxSigFile)
		if errors.Is(err, ErrNoEntry) {
			sigData, err = nil, nil // no signature file: refused below, as unsigned
		}
		if err != nil {
			return Item{}, nil, fmt.Errorf("read the signatures of entry %s: %w", it.Name(), err)
		}
		sigs := parseSigs(sigData)
		if !namesTrusted(sigs, s.Trusted) {
			_, err := sign.Verify(nil, sigs, s.Trusted) // says why: unsigned or by unknown keys
			return Item{}, nil, fmt.Errorf("entry %s %w: %w", it.Name(), errUntrusted, err)
		}
		data, err := readEntry(it, func(limit int64) ([]byte, error) { return get(it.Name(), limit) })
		if err != nil {
			return Item{}, nil, err
		}
		if _, err := verifyEntry(data, sigs, s.Trusted); err != nil {
			return Item{}, nil, fmt.Errorf("entry %s %w: %w", it.Name(), errUntrusted, err)
		}
		return it, data, nil
	}
	return Item{}, nil, ErrNoEntry
}

// httpGet reads url (https, or http to this machine) with at most limit
// bytes, by the manifest's rules for downloads: a redirect to plain http
// is refused unless it stays on this machine.
func httpGet(ctx context.Context, raw string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, sourceTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "guard (stash)")
	client := *fetch.DefaultClient()
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("more than 10 redirects")
		}
		if r.URL.Scheme == "http" && !(manifest.IsLoopback(via[len(via)-1].URL.Hostname()) && manifest.IsLoopback(r.URL.Hostname())) {
			return fmt.Errorf("refused a redirect to plain http %s", r.URL.Redacted())
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s: %w", req.URL.Redacted(), ErrNoEntry)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", req.URL.Redacted(), resp.Status)
	}
	if resp.ContentLength > limit {
		return nil, fmt.Errorf("%s: %d bytes, over %d: %w", req.URL.Redacted(), resp.ContentLength, limit, state.ErrTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.URL.Redacted(), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes: %w", req.URL.Redacted(), limit, state.ErrTooLarge)
	}
	return data, nil
}
