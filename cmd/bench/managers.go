package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// manager is another shim manager shimming the same trivial tool as
// guard's rows ($TOOLS/true, as "trivial"), so the start-up table shows
// guard beside what a sandbox would otherwise use. A manager is taken from
// PATH; with Runner.Managers (-install-managers) one that is not there is
// installed below the run's temp folder from the registry it ships in.
// A manager that is neither is a skipped row, saying why.
type manager struct {
	row     string
	command string                                                 // looked up on PATH
	from    string                                                 // how -install-managers gets it, for the skip message
	install func(dir string) error                                 // into dir, leaving the command in dir/bin
	shim    func(*Sandbox, string) (argv, env []string, err error) // shims "trivial" with the command at the given path
}

var managers = []manager{
	{row: "mise-shim", command: "mise", from: "npm install @jdxcode/mise", install: installMise, shim: miseShim},
	{row: "asdf-shim", command: "asdf", from: "go install github.com/asdf-vm/asdf/cmd/asdf", install: goInstall("github.com/asdf-vm/asdf/cmd/asdf@latest"), shim: asdfShim},
	{row: "aqua-proxy-shim", command: "aqua-proxy", from: "go install github.com/aquaproj/aqua-proxy and github.com/aquaproj/aqua/v2/cmd/aqua",
		install: goInstall("github.com/aquaproj/aqua-proxy@latest", "github.com/aquaproj/aqua/v2/cmd/aqua@latest"), shim: aquaShim},
}

// managerRows are the rows of every manager.
func managerRows() []Row {
	var rows []Row
	for _, m := range managers {
		rows = append(rows, Row{Name: m.row, Setup: m.setup})
	}
	return rows
}

func (m manager) setup(s *Sandbox, r *Row) error {
	path, err := exec.LookPath(m.command)
	if err != nil {
		if !s.rn.Managers {
			return fmt.Errorf("%s is not installed (not on PATH); -install-managers installs it (%s)", m.command, m.from)
		}
		dir := filepath.Join(s.rn.Root, "managers", m.command)
		if err := m.install(dir); err != nil {
			return fmt.Errorf("%s could not be installed: %v", m.command, err)
		}
		path = filepath.Join(dir, "bin", m.command)
	}
	if err := linkTool(s, "trivial"); err != nil {
		return err
	}
	argv, env, err := m.shim(s, path)
	if err != nil {
		return fmt.Errorf("%s could not shim a tool: %v", m.command, err)
	}
	r.Argv, r.Env = argv, env
	return nil
}

// runIn runs a manager's setup command with env on top of the sandbox's.
func runIn(s *Sandbox, env []string, argv ...string) error {
	_, err := s.RunEnv(env, argv...)
	return err
}

// installMise installs mise from npm: the package ships the binary.
func installMise(dir string) error {
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "@jdxcode/mise")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm install: %w\n%s", err, indent(string(out)))
	}
	bin := filepath.Join(dir, "node_modules", "@jdxcode", "mise", "bin", "mise")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	return os.Symlink(bin, filepath.Join(dir, "bin", "mise"))
}

// goInstall installs Go commands into dir/bin from the module proxy.
func goInstall(pkgs ...string) func(dir string) error {
	return func(dir string) error {
		for _, pkg := range pkgs {
			cmd := exec.Command("go", "install", pkg)
			cmd.Env = append(os.Environ(), "GOBIN="+filepath.Join(dir, "bin"), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go install %s: %s", pkg, lastCause(string(out)))
			}
		}
		return nil
	}
}

// asdfPlugin writes an asdf-style plugin for trivial (the form mise's asdf
// backend reads too): one version, installed as a copy of $TOOLS/true.
func asdfPlugin(s *Sandbox, dir string) error {
	if err := s.WriteFile(filepath.Join(dir, "bin", "list-all"), "#!/bin/sh\necho 1.0\n", 0o755); err != nil {
		return err
	}
	return s.WriteFile(filepath.Join(dir, "bin", "install"),
		"#!/bin/sh\nmkdir -p \"$ASDF_INSTALL_PATH/bin\" && ln "+shellQuote(s.Expand("$TOOLS/trivial"))+" \"$ASDF_INSTALL_PATH/bin/trivial\"\n", 0o755)
}

// miseShim: the plugin linked, version 1.0 linked to a folder holding the
// tool and used globally, then mise's shims made (links to mise itself).
// All of mise's files are below the sandbox's HOME.
func miseShim(s *Sandbox, mise string) ([]string, []string, error) {
	plugin, inst := s.Expand("$TMP/mise/plugin"), s.Expand("$TMP/mise/trivial-1.0")
	if err := asdfPlugin(s, plugin); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Join(inst, "bin"), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.Link(s.Expand("$TOOLS/trivial"), filepath.Join(inst, "bin", "trivial")); err != nil {
		return nil, nil, err
	}
	for _, argv := range [][]string{
		{mise, "plugins", "link", "trivial", plugin},
		{mise, "link", "trivial@1.0", inst},
		{mise, "use", "-g", "trivial@1.0"},
		{mise, "reshim"},
	} {
		if err := runIn(s, nil, argv...); err != nil {
			return nil, nil, err
		}
	}
	return []string{"$HOME/.local/share/mise/shims/trivial"}, nil, nil
}

// asdfShim: the plugin in asdf's data folder, version 1.0 installed by it
// and chosen in ~/.tool-versions; asdf's shim is a script that runs `asdf
// exec`, so asdf is on the row's PATH. (Not run where this was written:
// the Go module proxy there refused asdf; the steps are asdf's documented
// plugin interface.)
func asdfShim(s *Sandbox, asdf string) ([]string, []string, error) {
	env := []string{"ASDF_DATA_DIR=$TMP/asdf", "PATH=" + filepath.Dir(asdf) + ":$TOOLS:/usr/local/bin:/usr/bin:/bin"}
	if err := asdfPlugin(s, s.Expand("$TMP/asdf/plugins/trivial")); err != nil {
		return nil, nil, err
	}
	if err := s.WriteFile("$HOME/.tool-versions", "trivial 1.0\n", 0o644); err != nil {
		return nil, nil, err
	}
	if err := runIn(s, env, asdf, "install", "trivial", "1.0"); err != nil {
		return nil, nil, err
	}
	if err := runIn(s, env, asdf, "reshim", "trivial", "1.0"); err != nil {
		return nil, nil, err
	}
	return []string{"$TMP/asdf/shims/trivial"}, env, nil
}

// aquaShim: trivial as an http package of a local registry, served over
// loopback, allowed by a policy file and installed by aqua, whose link for
// it runs aqua-proxy (which execs `aqua exec`). aqua-proxy and aqua are
// on the row's PATH. (Not run where this was written: the Go module proxy
// there refused both; the steps are aqua's documented local registry and
// policy files. aqua also fetches its own pinned aqua-proxy from GitHub on
// install, so the row needs that reach as well.)
func aquaShim(s *Sandbox, proxy string) ([]string, []string, error) {
	aqua := filepath.Join(filepath.Dir(proxy), "aqua")
	if executable(aqua) != nil {
		var err error
		if aqua, err = exec.LookPath("aqua"); err != nil {
			return nil, nil, fmt.Errorf("aqua-proxy runs aqua, which is not installed: %v", err)
		}
	}
	srv := s.Expand("$TMP/aqua/srv")
	if err := os.MkdirAll(srv, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.Link(s.Expand("$TOOLS/trivial"), filepath.Join(srv, "trivial")); err != nil {
		return nil, nil, err
	}
	url, err := serveFolder(s, srv, false)
	if err != nil {
		return nil, nil, err
	}
	registry := fmt.Sprintf("packages:\n  - type: http\n    repo_owner: bench\n    repo_name: trivial\n    url: %s/trivial\n    format: raw\n    files:\n      - name: trivial\n", url)
	registries := "registries:\n  - name: local\n    type: local\n    path: registry.yaml\n"
	for file, text := range map[string]string{
		"$TMP/aqua/registry.yaml": registry,
		"$TMP/aqua/aqua.yaml":     registries + "packages:\n  - name: bench/trivial@v1.0.0\n    registry: local\n",
		"$TMP/aqua/policy.yaml":   registries + "packages:\n  - registry: local\n",
	} {
		if err := s.WriteFile(file, text, 0o644); err != nil {
			return nil, nil, err
		}
	}
	env := []string{
		"AQUA_ROOT_DIR=$TMP/aqua/root", "AQUA_CONFIG=$TMP/aqua/aqua.yaml", "AQUA_POLICY_CONFIG=$TMP/aqua/policy.yaml",
		"PATH=$TMP/aqua/root/bin:" + filepath.Dir(proxy) + ":" + filepath.Dir(aqua) + ":$TOOLS:/usr/local/bin:/usr/bin:/bin",
	}
	if err := runIn(s, env, aqua, "install"); err != nil {
		return nil, nil, err
	}
	link := s.Expand("$TMP/aqua/root/bin/trivial")
	if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("aqua made no link %s", link)
	}
	return []string{link}, env, nil
}

// lastCause is the end of the go command's first error line, the part
// that says why ("403 Forbidden"), without the module path and the
// registry's address before it.
func lastCause(out string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if i := strings.LastIndex(first, ": "); i >= 0 {
		return "the module proxy answered " + first[i+2:]
	}
	return first
}
