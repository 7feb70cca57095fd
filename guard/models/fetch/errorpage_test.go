package fetch_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
)

// TestErrorPageOfAnotherSize: an error page is (nearly) never the model's
// size, so a manifest with a size met it first as a size mismatch, whose
// message told the person to pin the page. It must be named for what it is
// and leave the next url its turn.
func TestErrorPageOfAnotherSize(t *testing.T) {
	data := guardtest.GGUF(70_000)
	pages := []struct{ name, body, want string }{
		{"html", "<!DOCTYPE html><html><body>Sign in</body></html>", "HTML page"},
		{"lfs", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 70000\n", "Git-LFS pointer"},
	}
	for _, tt := range pages {
		t.Run(tt.name, func(t *testing.T) {
			page := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
				w.Header().Set("Content-Type", "text/html")
				w.Write([]byte(tt.body))
			})
			good := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
			r := request(t, page.URL)
			r.Size = int64(len(data))
			_, err := fetch.Fetch(context.Background(), r)
			var be *fetch.BodyError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "manifest pin") {
				t.Fatalf("err = %v, want a *BodyError saying %q", err, tt.want)
			}
			mustNotExist(t, r.Dest, r.Dest+".partial")

			r.URLs = []string{page.URL, good.URL}
			if _, err := fetch.Fetch(context.Background(), r); err != nil {
				t.Fatalf("the second url was not tried: %v", err)
			}
			mustFile(t, r.Dest, data)
		})
	}
	t.Run("file mirror", func(t *testing.T) {
		mirror := filepath.Join(t.TempDir(), "m.gguf")
		os.WriteFile(mirror, []byte(pages[0].body), 0o644)
		r := request(t, (&url.URL{Scheme: "file", Path: mirror}).String())
		r.Size = int64(len(data))
		_, err := fetch.Fetch(context.Background(), r)
		var be *fetch.BodyError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "HTML page") {
			t.Fatalf("err = %v, want a *BodyError", err)
		}
	})
}
