package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
	"github.com/sandbox-guard/guard/guard/models/fetch/ranged"
)

// TestProxyFromEnvironment checks that the default client goes through
// HTTP_PROXY. Go reads the proxy variables once per process and never
// proxies a loopback host, so the download runs in a child process (this
// test binary again) with HTTP_PROXY set from the start, to a host name
// only the proxy knows.
func TestProxyFromEnvironment(t *testing.T) {
	data := guardtest.GGUF(70_000)
	if dest := os.Getenv("FETCH_TEST_PROXY_CHILD"); dest != "" {
		r := fetch.Request{URLs: []string{"http://models.example/m.gguf"}, Dest: dest, Size: int64(len(data)), SHA256: guardtest.Sum(data), Retries: -1}
		if _, err := fetch.Fetch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return
	}
	proxy := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if r.URL.Host != "models.example" || !r.URL.IsAbs() {
			http.Error(w, "not a proxy request: "+r.URL.String(), http.StatusBadGateway)
			return
		}
		content(w, r, data)
	})
	dest := filepath.Join(t.TempDir(), "m.gguf")
	cmd := exec.Command(os.Args[0], "-test.run=^TestProxyFromEnvironment$", "-test.count=1")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "REQUEST_METHOD":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "HTTP_PROXY="+proxy.URL, "FETCH_TEST_PROXY_CHILD="+dest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mustFile(t, dest, data)
	if proxy.requests.Load() != 1 {
		t.Fatalf("proxy saw %d requests, want 1", proxy.requests.Load())
	}
}

// TestNoSpace fills a 256 KiB tmpfs. It needs root (CI runs as root) and a
// sandbox that allows mounts. What was already downloaded is kept for the
// next run (docs/downloads.md, "A full disk"); a download that found no
// room before its first byte leaves nothing behind.
func TestNoSpace(t *testing.T) {
	dir := guardtest.SmallDisk(t, "2m")
	filler := filepath.Join(dir, "filler")
	data := guardtest.GGUF(1 << 20)
	var froms []int64 // the first byte each range request asked for
	var mu sync.Mutex
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) {
		if rg := r.Header.Get("Range"); rg != "" {
			var from int64
			fmt.Sscanf(rg, "bytes=%d-", &from)
			mu.Lock()
			froms = append(froms, from)
			mu.Unlock()
		}
		content(w, r, data)
	})
	dest := filepath.Join(dir, "m.gguf")
	fetchFull := func(t *testing.T, size int64, conns int) {
		t.Helper()
		r := request(t, srv.URL)
		r.Dest, r.Size = dest, size
		r.Connections, r.PartSize = conns, 64<<10
		_, err := fetch.Fetch(context.Background(), r)
		var se *fetch.SpaceError
		want := "no space left on device in " + dir
		if size > 0 {
			want += ": the download needs "
		}
		if !errors.Is(err, fetch.ErrNoSpace) || !errors.As(err, &se) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("err = %v, want one line of ErrNoSpace saying %q", err, want)
		}
		if se.Free < 0 || se.Free > 256<<10 {
			t.Errorf("free = %d, want the tmpfs's few free bytes", se.Free)
		}
	}
	// clean starts each case on a disk with 256 KiB free.
	clean := func() {
		for _, p := range []string{dest, dest + ".partial", dest + ".partial.meta", dest + ".partial.parts", filler} {
			os.Remove(p)
		}
		filler = fill(t, dir, 256<<10)
	}

	t.Run("size known", func(t *testing.T) {
		clean()
		fetchFull(t, int64(len(data)), 1)
		mustNotExist(t, dest, dest+".partial", dest+".partial.meta", dest+".partial.parts")
	})
	t.Run("in parts", func(t *testing.T) {
		clean()
		fetchFull(t, int64(len(data)), 4) // the preallocation finds no room
		mustNotExist(t, dest, dest+".partial", dest+".partial.meta", dest+".partial.parts")
	})
	t.Run("size unknown", func(t *testing.T) {
		clean()
		// No size, no preallocation: the writes fill the disk, and the
		// bytes that fit are kept, a true prefix of the file.
		fetchFull(t, 0, 1)
		got, err := os.ReadFile(dest + ".partial")
		if err != nil || len(got) == 0 || !bytes.Equal(got, data[:len(got)]) {
			t.Fatalf("partial: %d bytes, err %v; want a prefix of the file", len(got), err)
		}
		mustNotExist(t, dest)
	})
	t.Run("one stream resumed", func(t *testing.T) {
		clean()
		// An earlier run's 128 KiB, then no room for the rest: the
		// partial file and its validator stay as they were.
		writeFile(t, dest+".partial", data[:128<<10])
		meta := `{"url":"x","etag":"\"` + guardtest.Sum(data)[:16] + `\""}`
		writeFile(t, dest+".partial.meta", []byte(meta))
		fetchFull(t, int64(len(data)), 1)
		mustFile(t, dest+".partial", data[:128<<10])
		if _, err := os.Stat(dest + ".partial.meta"); err != nil {
			t.Errorf("the partial's validator is gone: %v", err)
		}
		// Room again: the next run resumes from byte 128 Ki.
		os.Remove(filler) // room again
		mu.Lock()
		froms = nil
		mu.Unlock()
		r := request(t, srv.URL)
		r.Dest, r.Size, r.Connections = dest, int64(len(data)), 1
		res, err := fetch.Fetch(context.Background(), r)
		if err != nil || !res.Resumed {
			t.Fatalf("resume: %+v, %v", res, err)
		}
		mustFile(t, dest, data)
		mu.Lock()
		defer mu.Unlock()
		if len(froms) != 1 || froms[0] != 128<<10 {
			t.Errorf("ranges asked from %v, want one from %d", froms, 128<<10)
		}
	})
	t.Run("parts resumed", func(t *testing.T) {
		clean()
		// A partial in parts on a file system that did not preallocate
		// it (a sparse file): its first part is there, the rest does
		// not fit. The parts written before the disk filled are kept
		// and recorded; with room again, none of them is fetched again.
		partialInParts(t, dest, data, 64<<10)
		fetchFull(t, int64(len(data)), 4)
		got, err := ranged.Load(dest + ".partial.parts")
		if err != nil {
			t.Fatalf("the record is gone: %v", err)
		}
		if got.Bytes() <= 64<<10 {
			t.Errorf("the record counts %d bytes, want more than the %d before the disk filled", got.Bytes(), 64<<10)
		}
		b, err := os.ReadFile(dest + ".partial")
		if err != nil || len(b) != len(data) {
			t.Fatalf("partial: %d bytes, %v", len(b), err)
		}
		for i, n := range got.Done {
			at := int64(i) * got.Part
			if !bytes.Equal(b[at:at+n], data[at:at+n]) {
				t.Errorf("part %d: the record counts %d bytes that are not the file's", i, n)
			}
		}
		os.Remove(filler) // room again
		mu.Lock()
		froms = nil
		mu.Unlock()
		r := request(t, srv.URL)
		r.Dest, r.Size, r.Connections, r.PartSize = dest, int64(len(data)), 4, 64<<10
		if _, err := fetch.Fetch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		mustFile(t, dest, data)
		mu.Lock()
		defer mu.Unlock()
		for _, from := range froms {
			i := from / got.Part
			if from < i*got.Part+got.Done[i] {
				t.Errorf("asked again from byte %d: part %d had %d bytes on record", from, i, got.Done[i])
			}
		}
	})
}

// fill writes a file into dir that leaves about leave bytes free there,
// and returns its path.
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	if err := os.WriteFile(p, make([]byte, max(fetch.FreeSpace(dir)-leave, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
