package fetch_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/models/fetch"
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
// sandbox that allows mounts.
func TestNoSpace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "full")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("mount tmpfs refused by the sandbox: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	data := guardtest.GGUF(1 << 20)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request, n int64, c *counter) { content(w, r, data) })
	for _, tt := range []struct {
		name  string
		size  int64
		conns int
		want  string
	}{
		{"size known", int64(len(data)), 1, "needs 1048576 more bytes (1.0 MiB) and "},
		{"size unknown", 0, 1, "no space left on device in " + dir},
		{"in parts", int64(len(data)), 4, "needs 1048576 more bytes (1.0 MiB) and "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := request(t, srv.URL)
			r.Dest = filepath.Join(dir, "m.gguf")
			r.Size = tt.size
			r.Connections, r.PartSize = tt.conns, 64<<10
			_, err := fetch.Fetch(context.Background(), r)
			var se *fetch.SpaceError
			if !errors.Is(err, fetch.ErrNoSpace) || !errors.As(err, &se) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrNoSpace saying %q", err, tt.want)
			}
			if se.Free < 0 || se.Free > 256<<10 {
				t.Errorf("free = %d, want the tmpfs's few free bytes", se.Free)
			}
			mustNotExist(t, r.Dest, r.Dest+".partial", r.Dest+".partial.meta", r.Dest+".partial.parts")
		})
	}
}
