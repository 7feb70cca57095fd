package stash

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/guard/state"
)

// Key is what decides a build's result, hashed: the steps, the source
// revision (with what git ignores and the submodules' own edits), the
// build's environment (CFLAGS and the like), the C and C++ compilers'
// versions and the CPU as the compiler sees it for -march=native (a
// -DGGML_NATIVE=ON build is compiled for this CPU). docs/stash.md, "The
// key", lists what it covers and what it cannot see. Source and Compiler
// are kept readable for `guard stash list`; Inputs for `guard stash key`.
type Key struct {
	Sum      string // hex sha256 of everything below
	Source   string // "git REV", "git REV dirty HASH" or "files HASH"
	Compiler string // the first line of the C compiler's --version
	Inputs   []Input
}

// Input is one part of a key as `guard stash key` shows it.
type Input struct {
	Name  string `json:"name"` // "steps", "source", "dirty", "untracked", "ignored", "submodule", "env", "cc", "c++", "cpu", "left out"
	Value string `json:"value"`
}

// KeyInput is what MakeKey reads.
type KeyInput struct {
	Steps   [][]string
	Dir     string   // the recipe's source folder
	Outputs []string // folders below Dir the steps write: not sources
	Env     []string // the steps' environment: its PATH finds git and the compilers; nil = guard's

	cpuInfo string // where the CPU flags are read; "" = /proc/cpuinfo (a test points it elsewhere)
}

// probeTimeout bounds each git or compiler run of a key.
const probeTimeout = 30 * time.Second

// MakeKey computes the key of a build of in.Dir by in.Steps on this
// machine. It fails only when the sources cannot be read.
//
// The compilers' --version runs go on beside git's: a restore a call waits
// for pays the longest probe, not their sum (docs/stash.md).
func MakeKey(ctx context.Context, in KeyInput) (Key, error) {
	var inputs []Input
	leftOut := 0
	note := func(name, value string) {
		if name == "left out" {
			if leftOut++; leftOut > maxLeftOutShown {
				return // a node_modules lists thousands: the count says the rest
			}
		}
		inputs = append(inputs, Input{name, value})
	}
	steps, _ := json.Marshal(in.Steps)
	note("steps", string(steps))
	// The compilers' --version runs go beside git's: a heal waits for the
	// slowest, not the sum (note is called from this goroutine only).
	cc, cxx := compilers(in)
	var ccV, cxxV string
	var wg sync.WaitGroup
	wg.Go(func() { ccV = compilerVersion(ctx, cc, in.Env) })
	wg.Go(func() { cxxV = compilerVersion(ctx, cxx, in.Env) })
	source, err := sourceRevision(ctx, in, note)
	wg.Wait()
	if err != nil {
		return Key{}, err
	}
	env := buildEnv(in.Env)
	for _, kv := range env {
		note("env", kv)
	}
	first, _, _ := strings.Cut(ccV, "\n")
	firstCXX, _, _ := strings.Cut(cxxV, "\n")
	note("cc", cc+": "+first)
	note("c++", cxx+": "+firstCXX)
	cpu := "arch " + runtime.GOARCH // a portable build runs on any CPU of its architecture
	if !portable(in.Steps, in.Env) {
		cpu = cpuTarget(ctx, cc, in.Env, in.cpuInfo)
	}
	note("cpu", cpu)
	h := sha256.New()
	for _, part := range []string{"guard-stash-key 2", string(steps), source, strings.Join(env, "\n"), ccV, cxxV, cpu} {
		fmt.Fprintf(h, "%d\n%s\n", len(part), part)
	}
	if leftOut > maxLeftOutShown {
		inputs = append(inputs, Input{"left out", fmt.Sprintf("and %d more", leftOut-maxLeftOutShown)})
	}
	inputs = append([]Input{{"source", source}}, inputs...)
	return Key{Sum: hex.EncodeToString(h.Sum(nil)), Source: source, Compiler: first, Inputs: inputs}, nil
}

// buildEnv is the part of the build's environment that changes what it
// makes, sorted: the flags every build system reads (CFLAGS, CXXFLAGS,
// CPPFLAGS, LDFLAGS), CC and CXX whole (CC="gcc -m32" is another build
// than gcc), and every CMAKE_* variable CMake reads at configure time,
// but CMAKE_BUILD_PARALLEL_LEVEL, a job count, which does not. An empty
// value counts as unset.
func buildEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	seen := map[string]string{}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "CMAKE_BUILD_PARALLEL_LEVEL":
		case strings.HasPrefix(name, "CMAKE_"), slices.Contains(flagVars, name):
			seen[name] = kv // the last one wins, as for a process
			if value == "" {
				delete(seen, name) // CFLAGS= builds as no CFLAGS does
			}
		}
	}
	out := slices.Collect(maps.Values(seen))
	slices.Sort(out)
	return out
}

// maxLeftOutShown bounds the files Inputs names as left out of the key.
const maxLeftOutShown = 20

var flagVars = []string{"CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CC", "CXX"}

// sourceRevision is git's HEAD, plus a hash of what is not committed
// (`git status --porcelain`, the diff against HEAD and the untracked files'
// contents, the output folders left out), or where there is no git a hash
// of the source files' names, sizes and contents.
func sourceRevision(ctx context.Context, in KeyInput, note func(name, value string)) (string, error) {
	if git, ok := resolve.LookPath("git", envValue(in.Env, "PATH")); ok {
		// One run gives both: the checkout's top (git status names
		// files from there, even when dir is a folder inside it) and HEAD.
		if out, err := runGit(ctx, git, in, "rev-parse", "--show-toplevel", "HEAD"); err == nil {
			if top, rev, ok := strings.Cut(strings.TrimSpace(out), "\n"); ok {
				return gitDirty(ctx, git, in, top, rev, note)
			}
		}
	}
	sum, err := hashTree(in.Dir, in.Outputs, note)
	if err != nil {
		return "", fmt.Errorf("hash the sources in %s: %w", in.Dir, err)
	}
	return "files " + sum, nil
}

// gitDirty is "git REV", or "git REV dirty HASH" where HASH covers what
// git status lists below dir (the output folders left out): each record,
// the diff against HEAD, and the contents of the untracked files and of
// the files .gitignore names (a local.cmake the CMakeLists.txt includes is
// as much a source as a tracked one); and the revision, computed the same
// way, of every submodule whose own tree is dirty (its edits, untracked
// or ignored files: the superproject sees only "-dirty", or nothing for
// an ignored file) and of every git checkout nested in dir untracked or
// ignored. Files that are not sources (notSource, notSourcePath) are left
// out, name and content.
func gitDirty(ctx context.Context, git string, in KeyInput, top, rev string, note func(name, value string)) (string, error) {
	spec := []string{"--", "."}
	for _, out := range in.Outputs {
		spec = append(spec, ":(exclude)"+out)
	}
	status, err := runGit(ctx, git, in, append([]string{"status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored"}, spec...)...)
	if err != nil {
		return "", fmt.Errorf("git status in %s: %w", in.Dir, err)
	}
	nested, err := dirtySubmodules(ctx, git, in, top)
	if err != nil {
		return "", err
	}
	if status == "" && len(nested) == 0 {
		return "git " + rev, nil
	}
	diff, err := runGit(ctx, git, in, append([]string{"diff", "HEAD", "--binary"}, spec...)...)
	if err != nil {
		return "", fmt.Errorf("git diff in %s: %w", in.Dir, err)
	}
	h := sha256.New()
	var contents []string // untracked and ignored files, hashed whole
	for _, rec := range strings.Split(status, "\x00") {
		if rec == "" {
			continue
		}
		// "XY PATH", X or Y a space; a rename's old path follows as a
		// record of its own, which is hashed as it is.
		var xy, name string
		if len(rec) > 3 && rec[2] == ' ' {
			xy, name = rec[:2], rec[3:]
		}
		full := filepath.Join(top, name)
		switch {
		case (xy == "??" || xy == "!!") && strings.HasSuffix(name, "/") && isSubmodule(full):
			// A checkout of its own inside dir (a vendored library
			// cloned there): git lists its folder, not its files.
			sub, err := sourceRevision(ctx, KeyInput{Dir: full, Env: in.Env}, func(string, string) {})
			if err != nil {
				return "", fmt.Errorf("the checkout %s: %w", name, err)
			}
			nested = append(nested, submodule{strings.TrimSuffix(name, "/"), sub})
		case xy == "??" || xy == "!!":
			if notSourcePath(name) || notSource(full) {
				note("left out", name)
				continue
			}
			contents = append(contents, name)
			note(map[string]string{"??": "untracked", "!!": "ignored"}[xy], name)
		case xy != "" && !isSubmodule(full):
			note("dirty", xy+" "+name)
		}
		io.WriteString(h, rec+"\x00")
	}
	if len(contents) == 0 && len(nested) == 0 && diff == "" {
		return "git " + rev, nil // dirty only by files that are not sources
	}
	io.WriteString(h, diff)
	for _, name := range contents {
		hashFile(h, filepath.Join(top, name))
	}
	for _, sub := range nested {
		note("submodule", sub.path+": "+sub.rev)
		fmt.Fprintf(h, "submodule %q %s\n", sub.path, sub.rev)
	}
	return "git " + rev + " dirty " + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// submodule is a checkout inside another and its revision.
type submodule struct{ path, rev string }

// dirtySubmodules lists the submodules of the checkout at top that lie in
// in.Dir (outside its outputs) and whose own tree is dirty, each with its
// revision. A clean one needs nothing: the superproject's commit and diff
// pin its HEAD. The list is .gitmodules' (none without one: no git run).
func dirtySubmodules(ctx context.Context, git string, in KeyInput, top string) ([]submodule, error) {
	if _, err := os.Lstat(filepath.Join(top, ".gitmodules")); err != nil {
		return nil, nil
	}
	out, err := runGit(ctx, git, KeyInput{Dir: top, Env: in.Env}, "config", "-f", ".gitmodules", "-z", "--get-regexp", `^submodule\..*\.path$`)
	if err != nil {
		return nil, nil // no path in it (git config exits 1): no submodule
	}
	var subs []submodule
	for _, rec := range strings.Split(out, "\x00") {
		_, p, ok := strings.Cut(rec, "\n")
		if !ok || p == "" {
			continue
		}
		full := filepath.Join(top, filepath.FromSlash(p))
		rel, err := filepath.Rel(in.Dir, full)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || !isSubmodule(full) || inOutputs(filepath.ToSlash(rel), in.Outputs) {
			continue
		}
		rev, err := sourceRevision(ctx, KeyInput{Dir: full, Env: in.Env}, func(string, string) {})
		if err != nil {
			return nil, fmt.Errorf("submodule %s: %w", p, err)
		}
		if strings.Contains(rev, " dirty ") {
			subs = append(subs, submodule{p, rev})
		}
	}
	return subs, nil
}

// inOutputs reports whether the slash path rel is an output folder or
// below one.
func inOutputs(rel string, outputs []string) bool {
	for _, o := range outputs {
		o = path.Clean(o)
		if rel == o || strings.HasPrefix(rel, o+"/") {
			return true
		}
	}
	return false
}

// isSubmodule reports whether p is the folder of a git submodule (its
// .git a file or a folder of its own).
func isSubmodule(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return false
	}
	_, err = os.Lstat(filepath.Join(p, ".git"))
	return err == nil
}

// notSourcePath reports whether the slash path rel lies in what tools
// make beside the sources and no build reads: Python's byte code and the
// caches and environments of Python and node. Running a convert script
// of llama.cpp writes __pycache__, which must not make the stash miss.
func notSourcePath(rel string) bool {
	if strings.HasSuffix(rel, ".pyc") {
		return true
	}
	for _, part := range strings.Split(rel, "/") {
		switch part {
		case "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules", ".venv", "venv":
			return true
		}
	}
	return false
}

// maxSourceBytes is the size from which a file beside the sources is not
// taken for one: a GGUF model kept in ~/llama.cpp/models, an archive, a
// data set. Such a file is left out of the key, name and content, so that
// the sandbox evicting it (it is the kind of file a sandbox evicts) does
// not make every stash entry miss, and a heal never hashes gigabytes.
const maxSourceBytes = 16 << 20

// notSource reports whether the file at p is too large to be a source.
func notSource(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Size() >= maxSourceBytes
}

func runGit(ctx context.Context, git string, in KeyInput, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, append([]string{"-C", in.Dir}, args...)...)
	// No index refresh written by a status: reading must not change the tree.
	env := in.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string(nil), env...), "GIT_OPTIONAL_LOCKS=0")
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	return out.String(), err
}

// hashTree hashes every file below dir but the output folders, .git and
// files that are not sources (maxSourceBytes, notSourcePath), in lexical order: its
// path, its size and its content's sha256 (a symlink's target instead).
func hashTree(dir string, outputs []string, note func(name, value string)) (string, error) {
	skip := map[string]bool{".git": true}
	for _, o := range outputs {
		skip[filepath.Clean(o)] = true
	}
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && skip[rel] {
			return filepath.SkipDir
		}
		if rel != "." && notSourcePath(filepath.ToSlash(rel)) {
			note("left out", filepath.ToSlash(rel))
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(h, "%q -> %q\n", rel, target)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.Size() >= maxSourceBytes {
				note("left out", filepath.ToSlash(rel))
				return nil // not a source: see maxSourceBytes
			}
			fmt.Fprintf(h, "%q %d ", rel, fi.Size())
			hashFile(h, p)
			io.WriteString(h, "\n")
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// hashFile adds the sha256 of the regular file at p to h, or a note that
// it could not be read (the key then differs from any readable state).
func hashFile(h io.Writer, p string) {
	f, err := state.OpenRegular(p, true)
	if err != nil {
		fmt.Fprintf(h, "unreadable")
		return
	}
	defer f.Close()
	fh := sha256.New()
	if _, err := io.Copy(fh, f); err != nil {
		fmt.Fprintf(h, "unreadable")
		return
	}
	fmt.Fprintf(h, "%x", fh.Sum(nil))
}

// compilers are the C and C++ compilers a build uses, named from what is
// there before it runs, as CMake chooses them: a -DCMAKE_C_COMPILER= (and
// CXX) in the steps, else CC and CXX in the steps' environment, else cc
// and c++ on PATH. Never from the build folder (CMake's cache): a heal
// computes the key with build/ evicted, and must find the entry the build
// was stashed under.
func compilers(in KeyInput) (cc, cxx string) {
	for _, step := range in.Steps {
		for _, arg := range step {
			if v, ok := cmakeDefine(arg, "CMAKE_C_COMPILER"); ok && cc == "" {
				cc = v
			}
			if v, ok := cmakeDefine(arg, "CMAKE_CXX_COMPILER"); ok && cxx == "" {
				cxx = v
			}
		}
	}
	first := func(v string) string { // CC="gcc -m32" is gcc, CC="ccache gcc" too
		f := strings.Fields(v)
		for len(f) > 1 && launchers[filepath.Base(f[0])] {
			f = f[1:]
		}
		if len(f) == 0 {
			return ""
		}
		return f[0]
	}
	return cmp.Or(cc, first(envValue(in.Env, "CC")), "cc"), cmp.Or(cxx, first(envValue(in.Env, "CXX")), "c++")
}

// launchers run the compiler named after them: the compiler is the next
// word (CC="ccache gcc" builds with gcc's version and CPU).
var launchers = map[string]bool{"ccache": true, "sccache": true, "distcc": true, "icecc": true}

// cmakeDefine reads -DNAME=VALUE or -DNAME:TYPE=VALUE.
func cmakeDefine(arg, name string) (string, bool) {
	rest, ok := strings.CutPrefix(arg, "-D"+name)
	if !ok {
		return "", false
	}
	if typed, ok := strings.CutPrefix(rest, ":"); ok {
		_, rest, _ = strings.Cut(typed, "=")
		return rest, rest != ""
	}
	rest, ok = strings.CutPrefix(rest, "=")
	return rest, ok && rest != ""
}

// compilerVersion is the --version output of compiler, run by its real
// path so that cc and the gcc-12 it links to print the same, or "none".
func compilerVersion(ctx context.Context, compiler string, env []string) string {
	path := compiler
	if !filepath.IsAbs(path) {
		var ok bool
		if path, ok = resolve.LookPath(compiler, envValue(env, "PATH")); !ok {
			return "none"
		}
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return "none"
	}
	return strings.TrimSpace(string(out))
}

// portable reports whether the steps build llama.cpp's portable CPU code,
// as its own releases are: -DGGML_NATIVE=OFF with -DGGML_BACKEND_DL=ON
// and -DGGML_CPU_ALL_VARIANTS=ON, which build the CPU backend once per
// instruction set level and load the best one the machine has at run
// time, and no -march or -m flag of its own (in the steps, or CFLAGS and
// CXXFLAGS in env). Then the CPU part of the key is the architecture
// alone, so every machine of it shares the entry. GGML_NATIVE=OFF alone is
// not portable: ggml then turns AVX2, FMA, F16C and BMI2 on by default,
// and a machine without them would restore a binary that dies of SIGILL.
func portable(steps [][]string, env []string) bool {
	defs := map[string]string{}
	var flags []string
	for _, step := range steps {
		for _, arg := range step {
			for _, name := range []string{"GGML_NATIVE", "GGML_BACKEND_DL", "GGML_CPU_ALL_VARIANTS"} {
				if v, ok := cmakeDefine(arg, name); ok {
					defs[name] = strings.ToUpper(v)
				}
			}
			for _, name := range []string{"CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS"} {
				if v, ok := cmakeDefine(arg, name); ok {
					flags = append(flags, v)
				}
			}
			if strings.HasPrefix(arg, "-DGGML_CPU_ARM_ARCH") {
				return false // an instruction set named by hand
			}
		}
	}
	flags = append(flags, envValue(env, "CFLAGS"), envValue(env, "CXXFLAGS"), envValue(env, "CMAKE_C_FLAGS"), envValue(env, "CMAKE_CXX_FLAGS"))
	for _, f := range flags {
		for _, word := range strings.Fields(f) {
			if strings.HasPrefix(word, "-m") && word != "-m32" && word != "-m64" { // -march, -mtune, -mcpu, -mavx2 …
				return false
			}
		}
	}
	off := func(v string) bool { return v == "OFF" || v == "0" || v == "FALSE" || v == "NO" || v == "N" }
	on := func(v string) bool { return v == "ON" || v == "1" || v == "TRUE" || v == "YES" || v == "Y" }
	return off(defs["GGML_NATIVE"]) && on(defs["GGML_BACKEND_DL"]) && on(defs["GGML_CPU_ALL_VARIANTS"])
}

// cpuTarget is the CPU as the C compiler cc resolves -march=native:
// gcc's cc1 options (-march=rocketlake -mavx2 -mno-xop …), clang's
// -target-cpu and -target-feature list. That, not /proc/cpuinfo's flags,
// is what a native build is compiled for, so two machines of a fleet whose
// kernels list other flags (a microcode bug, a hypervisor's) for the same
// CPU share entries. A compiler that cannot say falls back to the flags
// line of /proc/cpuinfo (cpuInfo, "" for that file), which is stricter.
func cpuTarget(ctx context.Context, cc string, env []string, cpuInfo string) string {
	path := cc
	if !filepath.IsAbs(path) {
		var ok bool
		if path, ok = resolve.LookPath(cc, envValue(env, "PATH")); !ok {
			return "flags " + cpuFlags(cpuInfo)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	// -### prints the commands it would run, with the options native
	// resolved to, and runs none of them.
	cmd := exec.CommandContext(ctx, path, "-march=native", "-###", "-E", "-x", "c", os.DevNull)
	cmd.Env = env
	out, _ := cmd.CombinedOutput()
	if t := nativeTarget(string(out)); t != "" {
		return "native " + t
	}
	return "flags " + cpuFlags(cpuInfo)
}

// nativeTarget reads the options -march=native became from the output of
// `cc -march=native -###`: gcc's -march=, -mtune= and -m options of cc1,
// or clang's -target-cpu and -target-feature values; "" when it has none.
func nativeTarget(out string) string {
	var opts []string
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(strings.ReplaceAll(line, `"`, ""))
		if len(fields) == 0 || !strings.HasSuffix(fields[0], "cc1") && !slices.Contains(fields, "-target-cpu") {
			continue
		}
		for i, f := range fields {
			switch {
			case f == "-target-cpu" || f == "-target-feature":
				if i+1 < len(fields) {
					opts = append(opts, f+"="+fields[i+1])
				}
			case strings.HasPrefix(f, "-march=") || strings.HasPrefix(f, "-mtune=") ||
				strings.HasPrefix(f, "-m") && !strings.Contains(f, "=") && f != "-march=native":
				opts = append(opts, f)
			}
		}
		if len(opts) > 0 {
			break
		}
	}
	return strings.Join(opts, " ")
}

// cpuFlags is the first flags line of /proc/cpuinfo, or of the file
// cpuInfo names (Features on arm64).
func cpuFlags(cpuInfo string) string {
	if cpuInfo == "" {
		cpuInfo = "/proc/cpuinfo"
	}
	data, err := state.ReadRegular(cpuInfo, 8<<20, false)
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if n := strings.TrimSpace(name); ok && (n == "flags" || n == "Features") {
			return strings.TrimSpace(value)
		}
	}
	return "unknown"
}

func envValue(env []string, key string) string {
	if env == nil {
		return os.Getenv(key)
	}
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}
