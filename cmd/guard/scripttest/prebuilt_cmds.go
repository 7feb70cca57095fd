package scripttest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// No test reaches GitHub's API: every script starts with GITHUB_API_URL
// at a local port nothing listens on (a call that would ask it costs one
// refused connection, remembered; setup sets it), and a script that wants
// releases serves them with ghrelease.

// unreachableAPI is a loopback port nothing listens on.
const unreachableAPI = "http://127.0.0.1:1"

// ghrelease serve: start a stand-in for GitHub's releases API and its
// downloads on 127.0.0.1 and point GITHUB_API_URL at it; it serves
// $WORK/releases/TAG.json for /repos/OWNER/REPO/releases/tags/TAG and the
// files of $WORK/releases/dl, and appends each API request's tag to
// $WORK/releases/requests.
//
// ghrelease publish TAG CHECKOUT ASSET FILE [nodigest|digest=FILE2]: a
// release of TAG at CHECKOUT's HEAD with the asset ASSET ({arch}: this
// machine's, as llama.cpp names it) served as FILE and declared with
// FILE's sha256 (nodigest: none; digest=FILE2: FILE2's, a tampered asset).
func cmdGHRelease(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: ghrelease serve | ghrelease publish TAG CHECKOUT ASSET FILE [nodigest|digest=FILE2]")
	}
	root := ts.MkAbs("releases")
	switch args[0] {
	case "serve":
		ts.Check(os.MkdirAll(filepath.Join(root, "dl"), 0o755))
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, tag, ok := strings.Cut(r.URL.Path, "/releases/tags/"); ok && strings.HasPrefix(r.URL.Path, "/repos/") {
				mu.Lock()
				f, _ := os.OpenFile(filepath.Join(root, "requests"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				f.WriteString(tag + "\n")
				f.Close()
				mu.Unlock()
				data, err := os.ReadFile(filepath.Join(root, filepath.Base(tag)+".json"))
				if err != nil {
					http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write(data)
				return
			}
			if name, ok := strings.CutPrefix(r.URL.Path, "/dl/"); ok {
				http.ServeFile(w, r, filepath.Join(root, "dl", filepath.Base(name)))
				return
			}
			http.NotFound(w, r)
		}))
		ts.Defer(srv.Close)
		ts.Setenv("GITHUB_API_URL", srv.URL)
	case "publish":
		if len(args) < 5 {
			ts.Fatalf("usage: ghrelease publish TAG CHECKOUT ASSET FILE [nodigest|digest=FILE2]")
		}
		tag, checkout, asset, file := args[1], ts.MkAbs(args[2]), args[3], ts.MkAbs(args[4])
		arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
		asset = strings.NewReplacer("{arch}", arch, "{tag}", tag).Replace(asset)
		head, err := exec.Command("git", "-C", checkout, "rev-parse", "HEAD").Output()
		ts.Check(err)
		body, err := os.ReadFile(file)
		ts.Check(err)
		digest := "sha256:" + guardtest.Sum(body)
		if len(args) > 5 {
			switch other, ok := strings.CutPrefix(args[5], "digest="); {
			case args[5] == "nodigest":
				digest = ""
			case ok:
				digest = "sha256:" + guardtest.Sum([]byte(ts.ReadFile(other)))
			default:
				ts.Fatalf("ghrelease publish: %q is neither nodigest nor digest=FILE", args[5])
			}
		}
		ts.Check(os.WriteFile(filepath.Join(root, "dl", asset), body, 0o644))
		rel := map[string]any{
			"tag_name":         tag,
			"target_commitish": strings.TrimSpace(string(head)),
			"assets": []map[string]any{{
				"name": asset, "size": len(body), "digest": digest,
				"browser_download_url": ts.Getenv("GITHUB_API_URL") + "/dl/" + asset,
			}},
		}
		data, err := json.Marshal(rel)
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(root, tag+".json"), data, 0o644))
	default:
		ts.Fatalf("ghrelease: unknown %q", args[0])
	}
}
