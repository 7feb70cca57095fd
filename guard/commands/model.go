package commands

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/registry"
	"github.com/sandbox-guard/guard/guard/state"
)

// ModelPush is `guard model push FILE oci://HOST/REPO[:TAG]`: the GGUF
// file as one raw layer of a registry (docs/registry.md), whose digest is
// its sha256, and the manifest lines that name it.
func ModelPush(e *guard.Engine, out io.Writer, file, dest string) error {
	ref, err := registry.Parse(dest)
	if err != nil {
		return err
	}
	if strings.HasPrefix(ref.Reference, "sha256:") {
		return fmt.Errorf("%s: push to a tag (oci://HOST/REPO:TAG); the digest is the file's", dest)
	}
	// Opened once, non-blocking and checked regular: a FIFO or a device
	// is refused, not read forever, and what is pushed is what was checked.
	f, err := state.OpenRegular(file, false)
	if err != nil {
		return err
	}
	defer f.Close()
	repo, err := e.Registry().Open(ref)
	if err != nil {
		return err
	}
	name := filepath.Base(file)
	dgst, size, err := repo.PushModel(context.Background(), f, name)
	if err != nil {
		return fmt.Errorf("cannot push %s to %s: %w", name, dest, err)
	}
	fmt.Fprintf(out, "pushed %s (%d bytes) to %s as sha256 %s\nname it in a model of the manifest:\n\n[[models]]\nfile = %q\nsize = %d\nsha256 = %q\nurls = [%q]\n",
		name, size, dest, dgst.Encoded(), name, size, dgst.Encoded(), registry.Ref{Host: ref.Host, Repo: ref.Repo, Reference: string(dgst)}.String())
	return nil
}

// ModelPushUnderLease is ModelPush as a download for the fleet runs it in
// the background (push_to, docs/fleet-lease.md): it holds the fleet's
// lease of id while it pushes, and lets it go after, as published when
// the file is in the registry.
func ModelPushUnderLease(e *guard.Engine, out io.Writer, file, dest, id string) error {
	letGo := e.PublishModelUnderLease(filepath.Base(file), dest, id)
	err := ModelPush(e, out, file, dest)
	letGo(err == nil)
	return err
}
