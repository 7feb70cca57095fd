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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/guard/state"
)

// Key is what decides a build's result, hashed: the steps, the source
// revision, the C and C++ compilers' versions and the CPU's flags (a
// -DGGML_NATIVE=ON build is compiled for this CPU). Source and Compiler
// are kept readable for `guard stash list`.
type Key struct {
	Sum      string // hex sha256 of everything below
	Source   string // "git REV", "git REV dirty HASH" or "files HASH"
	Compiler string // the first line of the C compiler's --version
}

// KeyInput is what MakeKey reads.
type KeyInput struct {
	Steps   [][]string
	Dir     string   // the recipe's source folder
	Outputs []string // folders below Dir the steps write: not sources
	Env     []string // the steps' environment: its PATH finds git and the compilers; nil = guard's
}

// cpuInfo is where the CPU flags are read; a test points it elsewhere.
var cpuInfo = "/proc/cpuinfo"

// probeTimeout bounds each git or compiler run of a key.
const probeTimeout = 30 * time.Second

// MakeKey computes the key of a build of in.Dir by in.Steps on this
// machine. It fails only when the sources cannot be read.
func MakeKey(ctx context.Context, in KeyInput) (Key, error) {
	source, err := sourceRevision(ctx, in)
	if err != nil {
		return Key{}, err
	}
	cc, cxx := compilers(in)
	ccV, cxxV := compilerVersion(ctx, cc, in.Env), compilerVersion(ctx, cxx, in.Env)
	steps, _ := json.Marshal(in.Steps)
	h := sha256.New()
	for _, part := range []string{"guard-stash-key 1", string(steps), source, ccV, cxxV, cpuFlags()} {
		fmt.Fprintf(h, "%d\n%s\n", len(part), part)
	}
	first, _, _ := strings.Cut(ccV, "\n")
	return Key{Sum: hex.EncodeToString(h.Sum(nil)), Source: source, Compiler: first}, nil
}

// sourceRevision is git's HEAD, plus a hash of what is not committed
// (`git status --porcelain`, the diff against HEAD and the untracked files'
// contents, the output folders left out), or where there is no git a hash
// of the source files' names, sizes and contents.
func sourceRevision(ctx context.Context, in KeyInput) (string, error) {
	if git, ok := resolve.LookPath("git", envValue(in.Env, "PATH")); ok {
		// One run gives both: the checkout's top (git status names
		// files from there, even when dir is a folder inside it) and HEAD.
		if out, err := runGit(ctx, git, in, "rev-parse", "--show-toplevel", "HEAD"); err == nil {
			if top, rev, ok := strings.Cut(strings.TrimSpace(out), "\n"); ok {
				return gitDirty(ctx, git, in, top, rev)
			}
		}
	}
	sum, err := hashTree(in.Dir, in.Outputs)
	if err != nil {
		return "", fmt.Errorf("hash the sources in %s: %w", in.Dir, err)
	}
	return "files " + sum, nil
}

func gitDirty(ctx context.Context, git string, in KeyInput, top, rev string) (string, error) {
	spec := []string{"--", "."}
	for _, out := range in.Outputs {
		spec = append(spec, ":(exclude)"+out)
	}
	status, err := runGit(ctx, git, in, append([]string{"status", "--porcelain=v1", "-z", "--untracked-files=all"}, spec...)...)
	if err != nil {
		return "", fmt.Errorf("git status in %s: %w", in.Dir, err)
	}
	if status == "" {
		return "git " + rev, nil
	}
	diff, err := runGit(ctx, git, in, append([]string{"diff", "HEAD", "--binary"}, spec...)...)
	if err != nil {
		return "", fmt.Errorf("git diff in %s: %w", in.Dir, err)
	}
	h := sha256.New()
	var untracked []string
	for _, rec := range strings.Split(status, "\x00") {
		name, ok := strings.CutPrefix(rec, "?? ")
		if ok && notSource(filepath.Join(top, name)) {
			continue // a model or an archive beside the sources: see notSource
		}
		io.WriteString(h, rec+"\x00")
		if ok {
			untracked = append(untracked, name)
		}
	}
	if len(untracked) == 0 && diff == "" {
		return "git " + rev, nil // dirty only by files that are not sources
	}
	io.WriteString(h, diff)
	for _, name := range untracked {
		hashFile(h, filepath.Join(top, name))
	}
	return "git " + rev + " dirty " + hex.EncodeToString(h.Sum(nil))[:16], nil
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
// files too large to be sources (maxSourceBytes), in lexical order: its
// path, its size and its content's sha256 (a symlink's target instead).
func hashTree(dir string, outputs []string) (string, error) {
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
	first := func(v string) string { // CC="gcc -m32" is gcc
		f := strings.Fields(v)
		if len(f) == 0 {
			return ""
		}
		return f[0]
	}
	return cmp.Or(cc, first(envValue(in.Env, "CC")), "cc"), cmp.Or(cxx, first(envValue(in.Env, "CXX")), "c++")
}

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

// cpuFlags is the first flags line of /proc/cpuinfo (Features on arm64).
func cpuFlags() string {
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
