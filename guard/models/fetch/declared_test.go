package fetch_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
)

// hub answers like huggingface.co/<repo>/resolve/<rev>/<file>: HEAD and
// GET get a 302 to the CDN path carrying X-Linked-Size and X-Linked-Etag
// (the LFS file's sha256); the CDN serves the bytes. size and sum are what
// it declares, body what the CDN serves.
type hub struct {
	*counter
	heads, cdnHeads atomic.Int64
}

func serveHub(t *testing.T, body []byte, size int, sum string) *hub {
	h := &hub{}
	h.counter = serveAll(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if strings.HasPrefix(r.URL.Path, "/cdn/") {
			if r.Method == http.MethodHead {
				h.cdnHeads.Add(1)
			}
			content(w, r, body)
			return
		}
		if r.Method == http.MethodHead {
			h.heads.Add(1)
		}
		w.Header().Set("X-Linked-Size", strconv.Itoa(size))
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("ETag", `W/"1234-abcd"`)
		http.Redirect(w, r, "/cdn/m.gguf?sig=x", http.StatusFound)
	}, true)
	return h
}

func TestDeclared(t *testing.T) {
	data := guardtest.GGUF(50_000)
	h := serveHub(t, data, len(data), guardtest.Sum(data))
	d, err := fetch.Declare(context.Background(), nil, h.URL+"/org/m/resolve/main/m.gguf", "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Size != int64(len(data)) || d.SHA256 != guardtest.Sum(data) || d.URL != h.URL+"/org/m/resolve/main/m.gguf" {
		t.Fatalf("Declare = %+v", d)
	}
	if h.cdnHeads.Load() != 0 || h.requests.Load() != 1 {
		t.Fatalf("the HEAD followed the redirect: %d requests, %d to the cdn", h.requests.Load(), h.cdnHeads.Load())
	}

	plain := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	if d, err := fetch.Declare(context.Background(), nil, plain.URL, ""); err != nil || d.SHA256 != "" || d.Size != 0 {
		t.Fatalf("Declare of a server that declares nothing = %+v, %v", d, err)
	}
}

// With no pin, the download is checked against the sha256 the server
// declared, and the result says who declared it.
func TestDeclaredSHA256IsChecked(t *testing.T) {
	data := guardtest.GGUF(50_000)
	h := serveHub(t, data, len(data), guardtest.Sum(data))
	src := h.URL + "/org/m/resolve/main/m.gguf"
	r := request(t, src)
	r.Size = int64(len(data))
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.DeclaredBy != src || res.SHA256 != guardtest.Sum(data) || h.heads.Load() != 1 {
		t.Fatalf("result %+v after %d HEADs", res, h.heads.Load())
	}

	// A server whose file is not the one it declares: refused, and the
	// next url is tried.
	other := guardtest.GGUF(50_000)
	other[40_000] ^= 1
	liar := serveHub(t, other, len(other), guardtest.Sum(data))
	r = request(t, liar.URL+"/org/m/resolve/main/m.gguf")
	r.Size = int64(len(data))
	_, err = fetch.Fetch(context.Background(), r)
	var me *fetch.MismatchError
	if !errors.As(err, &me) || me.What != "sha256" || !strings.Contains(err.Error(), "X-Linked-Etag") ||
		!strings.Contains(err.Error(), guardtest.Sum(data)) || !strings.Contains(err.Error(), guardtest.Sum(other)) {
		t.Fatalf("err = %v, want a sha256 mismatch with the declared sum", err)
	}
	mustNotExist(t, r.Dest, r.Dest+".partial")
}

// A declared size that is not the manifest's can never verify: one clear
// error naming both figures, the url and the fix, and no download.
func TestDeclaredSizeMismatchDownloadsNothing(t *testing.T) {
	data := guardtest.GGUF(50_000)
	h := serveHub(t, data, 420086080, guardtest.Sum(data))
	src := h.URL + "/org/m/resolve/main/m.gguf"
	r := request(t, src)
	r.Size = 484220320
	_, err := fetch.Fetch(context.Background(), r)
	var me *fetch.MismatchError
	if !errors.As(err, &me) || me.What != "size" {
		t.Fatalf("err = %v, want a size *MismatchError", err)
	}
	for _, want := range []string{src, "420086080", "484220320", "X-Linked-Size", "set size = 420086080", "nothing was downloaded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if n := h.requests.Load(); n != 1 || h.heads.Load() != 1 {
		t.Fatalf("%d requests (%d HEAD), want the HEAD alone", n, h.heads.Load())
	}
	mustNotExist(t, r.Dest, r.Dest+".partial")

	// A pin the declaration contradicts: the same, for the sha256.
	r = request(t, h.URL+"/org/m/resolve/main/m.gguf")
	r.Size, r.SHA256 = 420086080, strings.Repeat("ab", 32)
	_, err = fetch.Fetch(context.Background(), r)
	if !errors.As(err, &me) || me.What != "sha256" || !strings.Contains(err.Error(), "declares") {
		t.Fatalf("err = %v, want a declared sha256 mismatch", err)
	}
}

// The HEAD carries HF_TOKEN only where a GET would.
func TestDeclareSendsTokenOnlyToTheHub(t *testing.T) {
	for _, tt := range []struct {
		url  string
		sent bool
	}{
		{"https://huggingface.co/org/m/resolve/main/m.gguf", true},
		{"https://mirror.example/m.gguf", false},
	} {
		var got string
		c := &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
			got = req.Header.Get("Authorization")
			resp := newResponse(req, nil)
			resp.Header.Set("X-Linked-Size", "100")
			return resp, nil
		})}
		d, err := fetch.Declare(context.Background(), c, tt.url, "hf_secret")
		if err != nil || d.Size != 100 {
			t.Fatalf("%s: Declare = %+v, %v", tt.url, d, err)
		}
		if (got != "") != tt.sent {
			t.Errorf("%s: Authorization %q, want sent=%v", tt.url, got, tt.sent)
		}
	}
}
