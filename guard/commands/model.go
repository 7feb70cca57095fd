package commands

import (
	"context"
	"fmt"
	"io"
	"os"
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
	f, err := state.OpenRegular(file, false) // a FIFO or a device is refused, not read forever
	if err != nil {
		return err
	}
	f.Close()
	repo, err := e.Registry().Open(ref)
	if err != nil {
		return err
	}
	dgst, err := repo.PushModel(context.Background(), file)
	if err != nil {
		return fmt.Errorf("cannot push %s to %s: %w", filepath.Base(file), dest, err)
	}
	fi, _ := os.Stat(file)
	fmt.Fprintf(out, "pushed %s (%d bytes) to %s as sha256 %s\nname it in a model of the manifest:\n\n[[models]]\nfile = %q\nsize = %d\nsha256 = %q\nurls = [%q]\n",
		filepath.Base(file), fi.Size(), dest, dgst.Encoded(), filepath.Base(file), fi.Size(), dgst.Encoded(), registry.Ref{Host: ref.Host, Repo: ref.Repo, Reference: string(dgst)}.String())
	return nil
}
