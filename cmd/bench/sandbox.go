package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Sandbox is one table's throw-away world: a temp HOME and every GUARD_*
// path inside it, so nothing a row runs reaches the real HOME, ~/.shim or
// /tmp/selfheal.log.
type Sandbox struct {
	Dir string // $TMP: this table's temp folder
	// Vars are the names Row strings may use: TMP, HOME, TOOLS (the real
	// tools, on PATH after the shim folder), SHIM_DIR, STATE_DIR,
	// GUARD_LOG, GUARD_MANIFEST, BUILT (binaries built by Build), REPO (the
	// module's root), and whatever a Setup adds with Set.
	Vars     map[string]string
	env      []string
	rn       *Runner
	once     map[string]error
	cleanups []func()
}

func (rn *Runner) newSandbox(t *Table) (*Sandbox, error) {
	if err := os.MkdirAll(rn.Root, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(rn.Root, t.Name+".")
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, "home")
	v := map[string]string{
		"TMP":            dir,
		"HOME":           home,
		"TOOLS":          filepath.Join(dir, "tools"),
		"SHIM_DIR":       filepath.Join(home, ".shim"),
		"STATE_DIR":      filepath.Join(dir, "state"),
		"GUARD_LOG":      filepath.Join(dir, "selfheal.log"),
		"GUARD_MANIFEST": filepath.Join(dir, "manifest.toml"),
		"BUILT":          filepath.Join(rn.Root, "built"),
		"REPO":           rn.Repo,
	}
	for _, d := range []string{home, v["TOOLS"], v["BUILT"]} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return &Sandbox{
		Dir:  dir,
		Vars: v,
		// Built from nothing rather than from the harness's environment: the
		// figures must not depend on who runs them.
		env: []string{
			"HOME=" + home,
			"PATH=" + v["SHIM_DIR"] + ":" + v["TOOLS"] + ":/usr/local/bin:/usr/bin:/bin",
			"GUARD_LOG=" + v["GUARD_LOG"],
			"GUARD_STATE_DIR=" + v["STATE_DIR"],
			"GUARD_SHIM_DIR=" + v["SHIM_DIR"],
			"GUARD_MANIFEST=" + v["GUARD_MANIFEST"],
		},
		rn:   rn,
		once: map[string]error{},
	}, nil
}

// close runs the cleanups, last first. The folder itself goes with the
// Runner's Root.
func (s *Sandbox) close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// Cleanup registers f to run when the table is done (a server to stop, a
// folder outside $TMP to remove).
func (s *Sandbox) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

// Set adds a variable rows may name.
func (s *Sandbox) Set(name, value string) { s.Vars[name] = value }

// Expand replaces $NAME and ${NAME} by the sandbox's variables; a name it
// does not know stays as written, for a shell to expand.
func (s *Sandbox) Expand(str string) string {
	return os.Expand(str, func(name string) string {
		if v, ok := s.Vars[name]; ok {
			return v
		}
		return "${" + name + "}"
	})
}

// Once runs f the first time key is asked for and returns its error every
// time: a step several rows need (guard install) runs once a table.
func (s *Sandbox) Once(key string, f func() error) error {
	if err, ok := s.once[key]; ok {
		return err
	}
	err := f()
	s.once[key] = err
	return err
}

// Build builds the package (relative to the module root, like
// "./cmd/guard") as a release is built and returns the binary's path under
// $BUILT. Each package is built once a run, so every table times the same
// file.
func (s *Sandbox) Build(pkg string) (string, error) { return s.rn.build(pkg) }

// Guard builds guard and installs it in the sandbox (guard install
// --no-rc), every tool of the manifest a link to $SHIM_DIR/guard. That file
// is a hard link to the one built for the run, which install finds
// identical and keeps, so every guard row of every table times one file.
// The table's Setup writes the manifest first.
func (s *Sandbox) Guard() error {
	return s.Once("guard install", func() error {
		built, err := s.Build("./cmd/guard")
		if err != nil {
			return err
		}
		shim := filepath.Join(s.Vars["SHIM_DIR"], "guard")
		if err := os.MkdirAll(filepath.Dir(shim), 0o755); err != nil {
			return err
		}
		if err := os.Link(built, shim); err != nil {
			return err
		}
		_, err = s.Run(shim, "install", "--no-rc")
		return err
	})
}

// build is a row Setup that builds the row's program (see Build).
func build(pkg string) func(*Sandbox, *Row) error {
	return func(s *Sandbox, _ *Row) error {
		_, err := s.Build(pkg)
		return err
	}
}

// guardInstalled is the Setup of a row that calls guard (see Guard).
func guardInstalled(s *Sandbox, _ *Row) error { return s.Guard() }

// remove is a Before that deletes what the previous sample made.
func remove(path string) func(*Sandbox) error {
	return func(s *Sandbox) error {
		if err := os.Remove(s.Expand(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
}

// Command is a setup command (untimed), its strings expanded, in $TMP with
// the sandbox's environment.
func (s *Sandbox) Command(argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command")
	}
	argv = slices.Clone(argv)
	for i := range argv {
		argv[i] = s.Expand(argv[i])
	}
	path, err := s.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env, cmd.Dir = s.env, s.Dir
	return cmd, nil
}

// Run runs a setup command and returns its stdout and stderr together.
func (s *Sandbox) Run(argv ...string) (string, error) { return s.RunEnv(nil, argv...) }

// RunEnv is Run with env (KEY=VALUE, expanded) in place of the sandbox's
// entries of those keys.
func (s *Sandbox) RunEnv(env []string, argv ...string) (string, error) {
	cmd, err := s.Command(argv...)
	if err != nil {
		return "", err
	}
	for _, kv := range env {
		cmd.Env = setEnv(cmd.Env, s.Expand(kv))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, indent(string(out)))
	}
	return string(out), nil
}

// WriteFile writes a file (its path expanded), making its folder.
func (s *Sandbox) WriteFile(path, content string, perm fs.FileMode) error {
	path = s.Expand(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), perm)
}

// LookPath finds a program as the rows' environment would: a path as
// given, a bare name in the sandbox's PATH.
func (s *Sandbox) LookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	for _, kv := range s.env {
		if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(dirs) {
				p := filepath.Join(d, name)
				if executable(p) == nil {
					return p, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s is not installed (not in the sandbox's PATH)", name)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// build is Sandbox.Build, once a run for every table.
func (rn *Runner) build(pkg string) (string, error) {
	if p, ok := rn.bins[pkg]; ok {
		return p, nil
	}
	if err, ok := rn.binErr[pkg]; ok {
		return "", err
	}
	out := filepath.Join(rn.Root, "built", filepath.Base(pkg))
	var err error
	if pkg == "./cmd/guard" && rn.Guard != "" {
		err = copyFile(rn.Guard, out, 0o755)
	} else {
		fmt.Fprintf(rn.Log, "building %s\n", pkg)
		// As a release is built: a cgo link alone adds milliseconds a call,
		// and urfave/cli's docs code is left out of guard.
		cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-trimpath", "-ldflags", "-s -w", "-o", out, pkg)
		cmd.Dir, cmd.Env = rn.Repo, append(os.Environ(), "CGO_ENABLED=0")
		if o, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build %s: %w\n%s", pkg, berr, indent(string(o)))
		}
	}
	if rn.bins == nil {
		rn.bins, rn.binErr = map[string]string{}, map[string]error{}
	}
	if err != nil {
		rn.binErr[pkg] = err
		return "", err
	}
	rn.bins[pkg] = out
	return out, nil
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// healLogNote sums guard's heal log by event: a healthy call logs nothing,
// so events in a row that should be healthy mean it did not time the path
// it meant to (the cache-hit row's warm-up stores its answer).
func healLogNote(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	events := map[string]int{}
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ Event string }
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event == "" {
			ev.Event = "unreadable"
		}
		events[ev.Event]++
		total++
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if total == 0 {
		return "", nil
	}
	names := slices.SortedFunc(maps.Keys(events), func(a, b string) int {
		return cmp.Or(events[b]-events[a], strings.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, events[n])
	}
	return fmt.Sprintf("guard's heal log: %s (%s)", count(total, "event"), strings.Join(parts, ", ")), nil
}
