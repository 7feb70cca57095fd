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
// libraries lie beside the tools, ggml must say it loaded one: a build
// none of whose variants this CPU can run is refused before a call meets
// it. llama.cpp's tools load their backends for --version no more (and
// say so only at a higher log level), so where no --version said it, each
// tool is asked `TOOL -lv 4 --list-devices` (llama.cpp's common options:
// load every backend, list the devices, at the debug log level) until one
// says it; a tool that knows neither option says nothing and counts for
// nothing.
func check(ctx context.Context, tools map[string]string, env []string) error {
	variants, loaded := false, false
	names := slices.Sorted(maps.Keys(tools))
	for _, name := range names {
		p := tools[name]
		if len(cpuVariants(filepath.Dir(p))) > 0 {
			variants = true
		}
		out, err := probe(ctx, p, env, "--version")
		var ee *exec.ExitError
		switch {
		case errors.Is(err, errLate):
			return fmt.Errorf("%s --version did not end within %s", name, checkTimeout)
		case errors.As(err, &ee) && (ee.ExitCode() == 126 || ee.ExitCode() == 127 || ee.ExitCode() < 0):
			return fmt.Errorf("%s does not start here (%s: %s)", name, ee, firstLine(out))
		case err != nil && !errors.As(err, &ee):
			return fmt.Errorf("%s does not start here (%v)", name, err)
		}
		loaded = loaded || strings.Contains(out, cpuLoaded)
	}
	// Up to three rounds: llama.cpp's logger writes from a thread of its
	// own and can lose its last lines at exit (measured: the line missing
	// in 1 of 40 runs of the real llama-completion).
	for round := 0; round < 3 && variants && !loaded; round++ {
		for _, name := range names {
			out, _ := probe(ctx, tools[name], env, "-lv", "4", "--list-devices")
			if loaded = strings.Contains(out, cpuLoaded); loaded {
				break
			}
		}
	}
	if variants && !loaded {
		return errors.New("no CPU variant of ggml in the release loads on this CPU")
	}
	return nil
}

// errLate is a probe that did not end within checkTimeout.
var errLate = errors.New("did not end in time")

// probe runs the tool at p with args in its own folder and group, killed
// with its group after checkTimeout, and returns its output (stdout and
// stderr together).
func probe(ctx context.Context, p string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, args...)
	cmd.Env = env
	cmd.Dir = filepath.Dir(p)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), errLate
	}
	return out.String(), err
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
