package scripttest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/rogpeppe/go-internal/testscript"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/guard/stash"
)

// registry starts a real OCI registry (CNCF distribution, in-process,
// plain http on 127.0.0.1) for the rest of the script, sets $REGISTRY to
// its HOST:PORT, and signs $HOME in to it as `docker login` would.
func cmdRegistry(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registry")
	}
	reg, err := guardtest.NewRegistry(ts.MkAbs("."))
	ts.Check(err)
	ts.Defer(reg.Close)
	registries.Store(ts, reg)
	ts.Defer(func() { registries.Delete(ts) })
	ts.Setenv("REGISTRY", reg.Host)
	ts.Check(reg.DockerLogin(ts.Getenv("HOME")))
}

// stashcraft STASH DIR PATH FILE writes into DIR, as a hostile neighbour
// would, an index and an entry with the recipe and key of STASH's first
// entry, holding FILE as PATH (mode 0755): an entry any machine whose
// sources match would take for its build.
func cmdStashCraft(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: stashcraft STASH DIR PATH FILE")
	}
	items, err := (&stash.Store{Dir: ts.MkAbs(args[0])}).List()
	ts.Check(err)
	if len(items) == 0 {
		ts.Fatalf("no entry in %s", args[0])
	}
	it := items[0]
	root := ts.MkAbs("craft-root")
	target := filepath.Join(root, filepath.FromSlash(args[2]))
	ts.Check(os.MkdirAll(filepath.Dir(target), 0o755))
	ts.Check(os.WriteFile(target, []byte(ts.ReadFile(args[3])), 0o755))
	made := &stash.Store{Dir: ts.MkAbs("craft-stash")}
	_, err = made.Save(context.Background(), it.Recipe, stash.Key{Sum: it.Key}, root, []string{"build"}, []string{target})
	ts.Check(err)
	dir := ts.MkAbs(args[1])
	ts.Check(os.MkdirAll(dir, 0o777))
	names, err := filepath.Glob(filepath.Join(made.Dir, "*"))
	ts.Check(err)
	for _, n := range names {
		if filepath.Ext(n) == ".lock" {
			continue
		}
		data, err := os.ReadFile(n)
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(dir, filepath.Base(n)), data, 0o666))
	}
	ts.Check(os.RemoveAll(root))
	ts.Check(os.RemoveAll(made.Dir))
}

// ollamapush REF FILE pushes FILE to the registry as ollama lays a model
// out (REF is HOST/REPO:TAG): a Docker v2 manifest whose layers are the
// weights (application/vnd.ollama.image.model), a template and a license,
// with a container config, signed in as $HOME's docker login.
func cmdOllamaPush(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: ollamapush HOST/REPO:TAG FILE")
	}
	ref, tag, _ := strings.Cut(args[0], ":")
	if i := strings.LastIndex(args[0], ":"); i > strings.Index(args[0], "/") {
		ref, tag = args[0][:i], args[0][i+1:]
	}
	repo, err := remote.NewRepository(ref)
	ts.Check(err)
	repo.PlainHTTP = true
	repo.Client = &auth.Client{Credential: auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: guardtest.RegistryUser, Password: guardtest.RegistryPassword})}
	ctx := context.Background()
	push := func(mediaType string, data []byte) ocispec.Descriptor {
		d := content.NewDescriptorFromBytes(mediaType, data)
		ts.Check(repo.Push(ctx, d, bytes.NewReader(data)))
		return d
	}
	cfg := push("application/vnd.docker.container.image.v1+json", []byte(`{"model_format":"gguf","model_family":"llama"}`))
	layers := []ocispec.Descriptor{
		push("application/vnd.ollama.image.template", []byte("{{ .Prompt }}")),
		push("application/vnd.ollama.image.model", []byte(ts.ReadFile(args[1]))),
		push("application/vnd.ollama.image.license", []byte("a license")),
	}
	man, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", "config": cfg, "layers": layers})
	ts.Check(err)
	d := content.NewDescriptorFromBytes("application/vnd.docker.distribution.manifest.v2+json", man)
	ts.Check(repo.PushReference(ctx, d, bytes.NewReader(man), tag))
}
