package prebuilt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// checkTimeout bounds one tool's health run.
const checkTimeout = 20 * time.Second

// cpuLoaded is what ggml prints when it loads a backend library
// (ggml-backend-reg.cpp: "load_backend: loaded CPU backend from PATH").
const cpuLoaded = "loaded CPU backend from"

// findTools finds each of names in the folder root as a regular,
// executable file, wherever the archive put it (the shallowest one when
// there are several). A release need not make every tool of the recipe
// (llama.cpp's is built without its examples, llama-simple among them):
// the tools it lacks are left out, and only an archive with none of them
// is an error.
func findTools(root string, names []string) (map[string]string, error) {
	found := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !slices.Contains(names, d.Name()) {
			return err
		}
		if fi, err := d.Info(); err != nil || fi.Mode()&0o111 == 0 {
			return nil
		}
		if old, ok := found[d.Name()]; !ok || strings.Count(p, "/") < strings.Count(old, "/") {
			found[d.Name()] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("the release's archive has no %s", strings.Join(names, " nor "))
	}
	return found, nil
}

// cpuVariants are the CPU variant libraries of ggml beside a tool
// (libggml-cpu-haswell.so and the like, a GGML_BACKEND_DL build's).
func cpuVariants(dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "libggml-cpu*.so"))
	return m
}

// check runs each tool once, `TOOL --version`, as a call will run it (no
// added library path: the libraries beside it are found through its own
// RPATH): it must start, with every library it needs (not the loader's
// exit 127 or 126, nor a signal), within checkTimeout. Where CPU variant
// libraries lie beside the tools, one run at least must say ggml loaded
// one: a build none of whose variants this CPU can run is refused before
// a call meets it.
func check(ctx context.Context, tools map[string]string, env []string) error {
	variants, loaded := false, false
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		p := tools[name]
		if len(cpuVariants(filepath.Dir(p))) > 0 {
			variants = true
		}
		ctx, cancel := context.WithTimeout(ctx, checkTimeout)
		cmd := exec.CommandContext(ctx, p, "--version")
		cmd.Env = env
		cmd.Dir = filepath.Dir(p)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		err := cmd.Run()
		late := ctx.Err() != nil
		cancel()
		var ee *exec.ExitError
		switch {
		case late:
			return fmt.Errorf("%s --version did not end within %s", name, checkTimeout)
		case errors.As(err, &ee) && (ee.ExitCode() == 126 || ee.ExitCode() == 127 || ee.ExitCode() < 0):
			return fmt.Errorf("%s does not start here (%s: %s)", name, ee, firstLine(out.String()))
		case err != nil && !errors.As(err, &ee):
			return fmt.Errorf("%s does not start here (%v)", name, err)
		}
		if strings.Contains(out.String(), cpuLoaded) {
			loaded = true
		}
	}
	if variants && !loaded {
		return errors.New("no CPU variant of ggml in the release loads on this CPU")
	}
	return nil
}

// firstLine is s's first non-empty line, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "no output"
}

// isExecutable reports whether p is a regular file with an execute bit.
func isExecutable(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
