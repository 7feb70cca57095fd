package fetch_test

import (
	"context"
	"errors"
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
		{"refused token", false, 401, "tok", "HF_TOKEN was refused"},
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

func TestBearerToken(t *testing.T) {
	data := guardtest.GGUF(1000)
	var auth atomic.Value
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		auth.Store(r.Header.Get("Authorization"))
		content(w, r, data)
	})
	r := request(t, srv.URL)
	r.Token = "hf_secret"
	if _, err := fetch.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := auth.Load(); got != "Bearer hf_secret" {
		t.Fatalf("Authorization = %q, want the bearer token (loopback)", got)
	}
}

// roundTrip answers every request itself, so a test can see what would go
// to a host on the network without any network.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTokenNeverOverPlainHTTP(t *testing.T) {
	data := guardtest.GGUF(100)
	for _, tt := range []struct {
		url  string
		sent bool
	}{
		{"http://models.example/m.gguf", false},
		{"https://models.example/m.gguf", true},
		{"http://localhost:9/m.gguf", true},
		{"http://[::1]:9/m.gguf", true},
	} {
		var got string
		var warn strings.Builder
		r := request(t, tt.url)
		r.Token = "hf_secret"
		r.Progress = &warn
		r.Client = &http.Client{Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
			got = req.Header.Get("Authorization")
			rec := newResponse(req, data)
			return rec, nil
		})}
		if _, err := fetch.Fetch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if (got != "") != tt.sent {
			t.Errorf("%s: Authorization %q, want sent=%v", tt.url, got, tt.sent)
		}
		if !tt.sent && !strings.Contains(warn.String(), "not sending HF_TOKEN") {
			t.Errorf("%s: no warning about the withheld token: %q", tt.url, warn.String())
		}
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

func TestStallResumes(t *testing.T) {
	data := guardtest.GGUF(1 << 20)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if n == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			w.Header().Set("ETag", `"`+guardtest.Sum(data)[:16]+`"`)
			w.Write(data[:400_000])
			w.(http.Flusher).Flush()
			select { // hang until the client gives up
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
		content(w, r, data)
	})
	r := request(t, srv.URL)
	r.Size, r.SHA256 = int64(len(data)), guardtest.Sum(data)
	r.StallTimeout = 150 * time.Millisecond
	var stalls atomic.Int32
	r.OnRetry = func(u string, attempt int, err error) {
		var se *fetch.StallError
		if errors.As(err, &se) {
			stalls.Add(1)
		}
	}
	res, err := fetch.Fetch(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, r.Dest, data)
	if stalls.Load() != 1 || !res.Resumed {
		t.Fatalf("stalls %d, resumed %v; want 1, true", stalls.Load(), res.Resumed)
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

func TestSizeMismatchStopsAtOnce(t *testing.T) {
	data := guardtest.GGUF(1000)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	mirror := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	r := request(t, srv.URL, mirror.URL)
	r.Size = 484220320
	_, err := fetch.Fetch(context.Background(), r)
	var me *fetch.MismatchError
	if !errors.As(err, &me) || me.What != "size" {
		t.Fatalf("err = %v, want a size *MismatchError", err)
	}
	for _, want := range []string{"1000", "484220320", "guard manifest pin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if srv.requests.Load() != 1 || mirror.requests.Load() != 0 {
		t.Errorf("requests %d + %d, want 1 + 0", srv.requests.Load(), mirror.requests.Load())
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
