package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
)

func TestPlainDownload(t *testing.T) {
	data := guardtest.GGUF(3<<20 + 17)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL+"/m.gguf")
	r.Size, r.SHA256 = int64(len(data)), strings.ToUpper(guardtest.Sum(data))
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.meta")
	if res.SHA256 != guardtest.Sum(data) || res.Bytes != int64(len(data)) || res.Resumed || res.Attempts != 1 || res.URL != srv.URL+"/m.gguf" {
		t.Fatalf("result = %+v", res)
	}
}

func TestUnknownSizeUnpinned(t *testing.T) {
	data := guardtest.GGUF(100_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.(http.Flusher).Flush() // no Content-Length: chunked
		w.Write(data)
	})
	r := request(t, srv.URL)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.SHA256 != guardtest.Sum(data) {
		t.Fatalf("sha256 %s, want %s", res.SHA256, guardtest.Sum(data))
	}
}

func TestNotFound(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte("Entry not found"))
	})
	r := request(t, srv.URL+"/repo/resolve/main/x.gguf")
	_, err := fetch.Fetch(context.Background(), r)
	var he *fetch.HTTPError
	if !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("err = %v, want a 404 *HTTPError", err)
	}
	for _, want := range []string{"/repo/resolve/main/x.gguf", "Entry not found", "manifest"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not contain %q", err, want)
		}
	}
	if srv.requests.Load() != 1 {
		t.Errorf("%d requests, want 1 (a 404 is not retried)", srv.requests.Load())
	}
	mustNotExist(t, r.Dest, r.Dest+".partial")
}

func TestErrorBodiesRejected(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"html", "<!DOCTYPE html><html><body>Sign in</body></html>", "HTML page"},
		{"lfs", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 484220320\n", "Git-LFS pointer"},
		{"json", `{"error":"Invalid rev id: mian"}`, "Invalid rev id"},
		{"entry", "Entry not found", "Entry not found"},
		{"not gguf", "PK\x03\x04 a zip file, not a model......................................................", "not a GGUF model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
				w.Write([]byte(tt.body)) // 200, as a misconfigured mirror would
			})
			r := request(t, srv.URL)
			_, err := fetch.Fetch(context.Background(), r)
			var be *fetch.BodyError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a *BodyError saying %q", err, tt.want)
			}
			if srv.requests.Load() != 1 {
				t.Errorf("%d requests, want 1", srv.requests.Load())
			}
			mustNotExist(t, r.Dest, r.Dest+".partial")
		})
	}
}

func TestOtherFilesSkipGGUFCheck(t *testing.T) {
	data := []byte("a tokenizer.json-like file that is not GGUF at all")
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL)
	r.Dest = filepath.Join(t.TempDir(), "notes.txt")
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
}

func TestUnauthorized(t *testing.T) {
	tests := []struct {
		name   string
		gated  bool
		status int
		token  string
		want   string
	}{
		{"gated 401", true, 401, "", "HF_TOKEN"},
		{"gated 403", true, 403, "tok", "gated"},
		{"private", false, 401, "", "set HF_TOKEN"},
		{"forbidden", false, 403, "", "access denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
				if tt.gated {
					w.Header().Set("X-Error-Code", "GatedRepo")
				}
				w.WriteHeader(tt.status)
			})
			r := request(t, srv.URL)
			r.Token = tt.token
			_, err := fetch.Fetch(context.Background(), r)
			var he *fetch.HTTPError
			if !errors.As(err, &he) || he.Status != tt.status || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %d saying %q", err, tt.status, tt.want)
			}
			if srv.requests.Load() != 1 {
				t.Errorf("%d requests, want 1", srv.requests.Load())
			}
		})
	}
}

// roundTrip answers every request itself, so a test can see what would go
// to a host on the network without any network.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// HF_TOKEN goes to huggingface.co and its subdomains over https, nowhere
// else: not a mirror, not plain http, not this machine.
func TestTokenOnlyToHuggingFace(t *testing.T) {
	data := guardtest.GGUF(100)
	for _, tt := range []struct {
		url  string
		sent bool
	}{
		{"https://huggingface.co/org/m/resolve/main/m.gguf", true},
		{"https://cdn-lfs.huggingface.co/m.gguf", true},
		{"https://HuggingFace.CO./m.gguf", true},
		{"http://huggingface.co/m.gguf", false},
		{"https://models.example/m.gguf", false},
		{"https://huggingface.co.evil.example/m.gguf", false},
		{"https://evilhuggingface.co/m.gguf", false},
		{"http://127.0.0.1:9/m.gguf", false},
		{"http://localhost:9/m.gguf", false},
	} {
		var got string
		r := request(t, tt.url)
		r.Token = "hf_secret"
		r.Client = &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
			got = req.Header.Get("Authorization")
			return newResponse(req, data), nil
		})}
		if _, err := fetch.Fetch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if (got == "Bearer hf_secret") != tt.sent || (!tt.sent && got != "") {
			t.Errorf("%s: Authorization %q, want sent=%v", tt.url, got, tt.sent)
		}
	}
}

// hops is a fake network of redirects: each URL answers a redirect to the
// next, the last one the file. It records the Authorization each got.
func hops(data []byte, urls ...string) (*http.Client, map[string]string) {
	seen := map[string]string{}
	return &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
		u := req.URL.String()
		seen[u] = req.Header.Get("Authorization")
		for i, h := range urls[:len(urls)-1] {
			if h == u {
				resp := newResponse(req, nil)
				resp.StatusCode = http.StatusFound
				resp.Header.Set("Location", urls[i+1])
				return resp, nil
			}
		}
		return newResponse(req, data), nil
	})}, seen
}

func TestTokenAcrossRedirects(t *testing.T) {
	data := guardtest.GGUF(100)
	hf := "https://huggingface.co/org/m/resolve/main/m.gguf"
	for _, tt := range []struct {
		name string
		urls []string
		want []bool // the token reached each hop
	}{
		{"to the hub's cdn", []string{hf, "https://cdn-lfs.huggingface.co/x/m.gguf"}, []bool{true, true}},
		{"to another host", []string{hf, "https://cas-bridge.xethub.hf.co/m.gguf?sig=1"}, []bool{true, false}},
		{"off and back", []string{hf, "https://mirror.example/m.gguf", "https://huggingface.co/org/m/resolve/main/m2.gguf"}, []bool{true, false, true}},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			r := request(t, tt.urls[0])
			r.Token = "hf_secret"
			var seen map[string]string
			r.Client, seen = hops(data, tt.urls...)
			if _, err := fetch.Fetch(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			for i, u := range tt.urls {
				if got := seen[u] == "Bearer hf_secret"; got != tt.want[i] || (!tt.want[i] && seen[u] != "") {
					t.Errorf("hop %d %s: Authorization %q, want sent=%v", i, u, seen[u], tt.want[i])
				}
			}
		})
	}
}

// A redirect to plain http is refused, the same host included (Go would
// copy the token there), except from this machine to this machine.
func TestRedirectToPlainHTTP(t *testing.T) {
	data := guardtest.GGUF(100)
	for _, tt := range []struct {
		name string
		urls []string
	}{
		{"same host", []string{"https://huggingface.co/org/m/resolve/main/m.gguf", "http://huggingface.co/m.gguf"}},
		{"another host", []string{"https://mirror.example/m.gguf", "http://cdn.example/m.gguf"}},
		{"to this machine", []string{"https://mirror.example/m.gguf", "http://127.0.0.1:9/m.gguf"}},
		{"from this machine", []string{"http://127.0.0.1:9/m.gguf", "http://cdn.example/m.gguf"}},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			r := request(t, tt.urls[0])
			r.Token = "hf_secret"
			var seen map[string]string
			r.Client, seen = hops(data, tt.urls...)
			_, err := fetch.Fetch(context.Background(), r)
			if err == nil || !strings.Contains(err.Error(), "refused a redirect to plain http") || !strings.Contains(err.Error(), tt.urls[1]) {
				t.Fatalf("err = %v, want a refused redirect to %s", err, tt.urls[1])
			}
			if _, ok := seen[tt.urls[1]]; ok {
				t.Errorf("the plain http url was requested")
			}
			if len(seen) != 1 {
				t.Errorf("%d urls requested, want 1 (a refused redirect is not retried): %v", len(seen), seen)
			}
			mustNotExist(t, r.Dest, r.Dest+".partial")
		})
	}

	// Loopback to loopback: a local mirror and its redirects.
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if r.URL.Path == "/resolve" {
			http.Redirect(w, r, "/file", http.StatusFound)
			return
		}
		content(w, r, data)
	})
	r := request(t, srv.URL+"/resolve")
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
}

// This machine is this machine however the manifest spells it: fetch
// follows a plain-http redirect between loopback hosts by the rule the
// manifest admits a plain-http url with (manifest.IsLoopback), so a
// mirror the manifest accepts is never refused halfway.
func TestRedirectBetweenLoopbackSpellings(t *testing.T) {
	data := guardtest.GGUF(100)
	for _, urls := range [][]string{
		{"http://LOCALHOST:9/m.gguf", "http://127.0.0.1:9/m2.gguf"},
		{"http://127.0.0.1:9/m.gguf", "http://LocalHost:9/m2.gguf"},
		{"http://[::ffff:127.0.0.1]:9/m.gguf", "http://[::1]:9/m2.gguf"},
	} {
		r := request(t, urls[0])
		r.Client, _ = hops(data, urls...)
		if _, err := fetch.Fetch(context.Background(), r); err != nil {
			t.Errorf("%s -> %s: %v", urls[0], urls[1], err)
		}
	}
}

// A redirect loop is the server's configuration, not a hiccup: one try,
// then the next url.
func TestRedirectLoopNotRetried(t *testing.T) {
	data := guardtest.GGUF(1000)
	loop := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		next := "/a"
		if r.URL.Path == "/a" {
			next = "/b"
		}
		http.Redirect(w, r, next, http.StatusFound)
	})
	forever := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		http.Redirect(w, r, fmt.Sprintf("/%d", n), http.StatusFound)
	})
	mirror := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, loop.URL+"/a", forever.URL+"/0", mirror.URL)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.URL != mirror.URL {
		t.Fatalf("served by %s", res.URL)
	}
	if n := loop.requests.Load(); n != 2 {
		t.Errorf("the looping server got %d requests, want 2 (a -> b -> a is a loop)", n)
	}
	if n := forever.requests.Load(); n > 11 {
		t.Errorf("the endless redirector got %d requests, want at most 11", n)
	}
}

func TestRefusedToken(t *testing.T) {
	r := request(t, "https://huggingface.co/org/private/resolve/main/m.gguf")
	r.Token = "hf_wrong"
	r.Client = &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
		resp := newResponse(req, nil)
		resp.StatusCode = http.StatusUnauthorized
		return resp, nil
	})}
	_, err := fetch.Fetch(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "HF_TOKEN was refused") {
		t.Fatalf("err = %v", err)
	}
}

// A server that wants credentials it did not get says why it got none.
func TestWithheldTokenHint(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.WriteHeader(http.StatusUnauthorized)
	})
	r := request(t, srv.URL)
	r.Token = "hf_secret"
	_, err := fetch.Fetch(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "HF_TOKEN goes only to huggingface.co over https") {
		t.Fatalf("err = %v", err)
	}
}

func TestRetryAfter429(t *testing.T) {
	data := guardtest.GGUF(5000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		content(w, r, data)
	})
	r := request(t, srv.URL)
	var retries []string
	r.OnRetry = func(u string, attempt int, err error) { retries = append(retries, err.Error()) }
	start := time.Now()
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	// A lower bound only: the server asked for a second.
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Errorf("retried after %s; Retry-After asked for 1s", el)
	}
	if res.Attempts != 2 || len(retries) != 1 || !strings.Contains(retries[0], "429") {
		t.Fatalf("attempts %d, retries %q", res.Attempts, retries)
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	data := guardtest.GGUF(5000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n <= 2 {
			w.WriteHeader([]int{http.StatusInternalServerError, http.StatusBadGateway}[n-1])
			return
		}
		content(w, r, data)
	})
	r := request(t, srv.URL)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.Attempts != 3 {
		t.Fatalf("attempts = %d, want 3", res.Attempts)
	}
}

func TestRetriesRunOut(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	r := request(t, srv.URL)
	r.Retries = 2
	_, err := fetch.Fetch(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "gave up after") {
		t.Fatalf("err = %v", err)
	}
	if got := srv.requests.Load(); got != 3 {
		t.Fatalf("%d requests, want 3 (1 + 2 retries)", got)
	}
}

func TestDropMidBodyResumes(t *testing.T) {
	data := guardtest.GGUF(2 << 20)
	var ifRange atomic.Value
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n == 1 {
			dropAfter(w, data, 700_000)
		}
		ifRange.Store(r.Header.Get("If-Range"))
		content(w, r, data)
	})
	r := request(t, srv.URL)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if srv.ranges.Load() != 1 || !res.Resumed {
		t.Errorf("%d range requests, resumed %v; want 1, true", srv.ranges.Load(), res.Resumed)
	}
	if ifRange.Load() == "" {
		t.Error("resume sent no If-Range")
	}
	if sent := srv.sent.Load(); sent >= 2*int64(len(data)) {
		t.Errorf("server sent %d bytes for a %d-byte file", sent, len(data))
	}
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.meta")
}

func TestRangeIgnoredStartsOver(t *testing.T) {
	data := guardtest.GGUF(1 << 20)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n == 1 {
			dropAfter(w, data, 300_000)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data) // 200 whatever the Range says
	})
	r := request(t, srv.URL)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if srv.ranges.Load() != 1 || res.Resumed {
		t.Errorf("%d range requests, resumed %v; want 1, false", srv.ranges.Load(), res.Resumed)
	}
}

func TestRangeNotSatisfiableDiscards(t *testing.T) {
	data := guardtest.GGUF(50_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if r.Header.Get("Range") != "" {
			w.Header().Set("Content-Range", "bytes */"+strconv.Itoa(len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		content(w, r, data)
	})
	r := request(t, srv.URL)
	if err := os.WriteFile(r.Dest+".partial", []byte("GGUF\x03\x00\x00\x00 left from another file"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if srv.ranges.Load() != 1 || srv.requests.Load() != 2 || res.Resumed {
		t.Fatalf("requests %d (ranges %d), resumed %v", srv.requests.Load(), srv.ranges.Load(), res.Resumed)
	}
}

// A source that stalls mid-body is not asked again in the same Fetch
// (issue 36: a frozen registry was asked six times): the download resumes
// from the next url, and a second Fetch, the next call's, asks the first
// one again.
func TestStallResumesOnTheNextURL(t *testing.T) {
	data := guardtest.GGUF(1 << 20)
	frozen := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Header().Set("ETag", `"`+guardtest.Sum(data)[:16]+`"`)
			w.Write(data[:400_000])
			w.(http.Flusher).Flush()
			<-r.Context().Done() // hang until the client gives up
			return
		}
		content(w, r, data)
	})
	mirror := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, frozen.URL, mirror.URL)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	r.RateWindow = 150 * time.Millisecond
	var retries atomic.Int32
	r.OnRetry = func(u string, attempt int, err error) { retries.Add(1) }
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if frozen.requests.Load() != 1 || retries.Load() != 0 || !res.Resumed || res.URL != mirror.URL {
		t.Fatalf("the stalled source was asked %d times, %d retries; resumed %v from %s", frozen.requests.Load(), retries.Load(), res.Resumed, res.URL)
	}
	if ranges := mirror.ranges.Load(); ranges != 1 {
		t.Errorf("the mirror answered %d ranges, want the rest of the file in one", ranges)
	}

	// Alone, a stalled source ends the Fetch at its first stall, the
	// partial kept for the next.
	os.Remove(r.Dest)
	frozen.requests.Store(0)
	r.URLs = []string{frozen.URL}
	done := make(chan error, 1)
	go func() { _, err := fetch.Fetch(context.Background(), r); done <- err }()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a hang guard, not a verdict on speed
		t.Fatal("the Fetch of a frozen source did not end")
	}
	var all *fetch.SourcesError
	if !errors.As(err, &all) || !all.Stalled() || frozen.requests.Load() != 1 {
		t.Fatalf("err %v after %d requests; want one stall", err, frozen.requests.Load())
	}
	if fetch.PartialBytes(r.Dest) != 400_000 {
		t.Errorf("partial %d bytes, want the 400000 that came", fetch.PartialBytes(r.Dest))
	}
}

func TestWrongSHA256KeepsDest(t *testing.T) {
	data := guardtest.GGUF(200_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL)
	old := []byte("the model that was here before")
	if err := os.WriteFile(r.Dest, old, 0o644); err != nil {
		t.Fatal(err)
	}
	pin := strings.Repeat("ab", 32)
	r.Size, r.SHA256 = int64(len(data)), pin
	_, err := fetch.Fetch(context.Background(), r)
	var me *fetch.MismatchError
	if !errors.As(err, &me) || me.What != "sha256" {
		t.Fatalf("err = %v, want a sha256 *MismatchError", err)
	}
	for _, want := range []string{pin, guardtest.Sum(data), "guard manifest pin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if srv.requests.Load() != 1 {
		t.Errorf("%d requests, want 1 (a mismatch is not retried)", srv.requests.Load())
	}
	mustFile(t, r.Dest, old)
	mustNotExist(t, r.Dest+".partial", r.Dest+".partial.meta")
}

// A stale mirror serving another version is normal: a mismatch from one
// url moves on to the next. When every url mismatches, each is named.
func TestMismatchMovesToTheNextURL(t *testing.T) {
	data := guardtest.GGUF(100_000)
	other := guardtest.GGUF(1000)
	tampered := append([]byte(nil), data...)
	tampered[len(tampered)-1] ^= 1
	for _, tt := range []struct {
		name  string
		stale []byte
	}{
		{"wrong size", other},
		{"wrong bytes", tampered},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			stale := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, tt.stale) })
			mirror := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
			r := request(t, stale.URL, mirror.URL)
			r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
			res, err := fetch.Fetch(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			mustFile(t, r.Dest, data)
			if res.URL != mirror.URL || stale.requests.Load() != 1 || mirror.requests.Load() != 1 {
				t.Fatalf("served by %s after %d + %d requests", res.URL, stale.requests.Load(), mirror.requests.Load())
			}
		})
	}

	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, other) })
	r := request(t, srv.URL+"/a", srv.URL+"/b")
	r.Size = 484220320
	_, err := fetch.Fetch(context.Background(), r)
	var me *fetch.MismatchError
	var se *fetch.SourcesError
	if !errors.As(err, &me) || me.What != "size" || !errors.As(err, &se) || len(se.Errs) != 2 {
		t.Fatalf("err = %v, want a *SourcesError of two size mismatches", err)
	}
	for _, want := range []string{"every url failed", "/a", "/b", "1000", "484220320", "guard manifest pin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	mustNotExist(t, r.Dest, r.Dest+".partial")
}

func TestLongerBodyThanManifest(t *testing.T) {
	data := guardtest.GGUF(3 << 20)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.(http.Flusher).Flush() // chunked: the size shows only in the body
		w.Write(data)
	})
	r := request(t, srv.URL)
	r.Size = 1 << 20
	_, err := fetch.Fetch(context.Background(), r)
	var me *fetch.MismatchError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "1048576") {
		t.Fatalf("err = %v, want a size *MismatchError", err)
	}
	mustNotExist(t, r.Dest)
}

func TestFileMirrorAfterFailure(t *testing.T) {
	data := guardtest.GGUF(300_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.WriteHeader(http.StatusNotFound)
	})
	src := filepath.Join(t.TempDir(), "shared volume", "m.gguf")
	os.MkdirAll(filepath.Dir(src), 0o755)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mirror := (&url.URL{Scheme: "file", Path: src}).String()
	r := request(t, srv.URL, mirror)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if res.URL != mirror {
		t.Fatalf("served by %s, want %s", res.URL, mirror)
	}
}

func TestEveryURLFails(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.WriteHeader(http.StatusNotFound)
	})
	r := request(t, srv.URL+"/a.gguf", "file:///nonexistent/b.gguf")
	_, err := fetch.Fetch(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), "every url failed") ||
		!strings.Contains(err.Error(), "/a.gguf") || !strings.Contains(err.Error(), "/nonexistent/b.gguf") {
		t.Fatalf("err = %v", err)
	}
	var he *fetch.HTTPError
	if !errors.As(err, &he) {
		t.Fatalf("errors.As(*HTTPError) failed on %v", err)
	}
}

func TestResumeAcrossRuns(t *testing.T) {
	data := guardtest.GGUF(1 << 20)
	half := len(data) / 2
	var ifRange atomic.Value
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		ifRange.Store(r.Header.Get("If-Range"))
		content(w, r, data)
	})
	r := request(t, srv.URL)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	os.WriteFile(r.Dest+".partial", data[:half], 0o644)
	os.WriteFile(r.Dest+".partial.meta", []byte(`{"url":"x","etag":"\"`+guardtest.Sum(data)[:16]+`\""}`), 0o644)
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if !res.Resumed || res.Bytes != int64(len(data)-half) || srv.sent.Load() != int64(len(data)-half) {
		t.Fatalf("result %+v, server sent %d", res, srv.sent.Load())
	}
	if ifRange.Load() != `"`+guardtest.Sum(data)[:16]+`"` {
		t.Fatalf("If-Range = %q", ifRange.Load())
	}
}

func TestResumedPartialOfAnotherFile(t *testing.T) {
	data := guardtest.GGUF(1 << 20)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	other := guardtest.GGUF(1 << 19)
	other[1000] ^= 1 // same start, different bytes: only the hash can tell
	os.WriteFile(r.Dest+".partial", other, 0o644)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if srv.requests.Load() != 2 {
		t.Fatalf("%d requests, want 2 (a resume, then a fresh start)", srv.requests.Load())
	}
}

func TestCompletePartialNeedsNoRequest(t *testing.T) {
	data := guardtest.GGUF(10_000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	os.WriteFile(r.Dest+".partial", data, 0o644)
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if srv.requests.Load() != 0 {
		t.Fatalf("%d requests, want 0", srv.requests.Load())
	}
}

func TestContextCancelled(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	r := request(t, srv.URL)
	r.Backoff = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := fetch.Fetch(ctx, r)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A download stopped while it waits to retry says what it was retrying
// after: "context deadline exceeded" alone would hide the real failure.
func TestStoppedWhileRetryingNamesTheFailure(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	r := request(t, srv.URL)
	r.Backoff = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.OnRetry = func(string, int, error) { cancel() }
	_, err := fetch.Fetch(ctx, r)
	var stopped *fetch.StoppedError
	if !errors.As(err, &stopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a *StoppedError matching context.Canceled", err)
	}
	if !strings.Contains(stopped.Last.Error(), "503") || !strings.Contains(err.Error(), "retrying after") {
		t.Fatalf("err = %v, want it to name the 503 it was retrying after", err)
	}
}

func TestRetryAfterPastDeadline(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	r := request(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := fetch.Fetch(ctx, r)
	if err == nil || !strings.Contains(err.Error(), "time limit") || srv.requests.Load() != 1 {
		t.Fatalf("err = %v after %d requests", err, srv.requests.Load())
	}
}

func TestNoURL(t *testing.T) {
	if _, err := fetch.Fetch(context.Background(), request(t)); err == nil {
		t.Fatal("no error")
	}
	r := request(t, "ftp://example.com/m.gguf")
	if _, err := fetch.Fetch(context.Background(), r); err == nil || !strings.Contains(err.Error(), "scheme") {
		t.Fatalf("err = %v", err)
	}
}
