package stash

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func keyOf(t *testing.T, dir string) Key {
	t.Helper()
	k, err := MakeKey(context.Background(), KeyInput{Steps: [][]string{{"make"}}, Dir: dir, Outputs: []string{"build"}, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyFollowsSourcesNotOutputs(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
	os.MkdirAll(filepath.Join(dir, "build"), 0o755)
	k1 := keyOf(t, dir)
	if !strings.HasPrefix(k1.Source, "files ") {
		t.Fatalf("source %q, want a hash of the files", k1.Source)
	}
	os.WriteFile(filepath.Join(dir, "build", "a.o"), []byte("object"), 0o644)
	if k := keyOf(t, dir); k.Sum != k1.Sum {
		t.Errorf("an output changed the key")
	}
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int b;"), 0o644)
	if k := keyOf(t, dir); k.Sum == k1.Sum {
		t.Errorf("a changed source kept the key")
	}
	steps, _ := MakeKey(context.Background(), KeyInput{Steps: [][]string{{"make", "-j4"}}, Dir: dir, Outputs: []string{"build"}, Env: os.Environ()})
	if steps.Sum == keyOf(t, dir).Sum {
		t.Errorf("other steps kept the key")
	}
}

// The CPU part of the key is what the compiler makes of -march=native,
// so machines whose kernels list other flags for the same CPU share
// entries, and another CPU misses; a compiler that cannot say falls back
// to /proc/cpuinfo's flags.
func TestKeyCPUIsWhatNativeResolvesTo(t *testing.T) {
	bin := t.TempDir()
	// gcc -### prints the cc1 command with the options native became.
	cc := "#!/bin/sh\ncase \"$*\" in *-###*) [ -n \"$MARCH\" ] && echo \" /usr/lib/gcc/x/12/cc1 -E -quiet /dev/null \\\"-march=$MARCH\\\" -mavx2 -mno-xop --param l1-cache-size=48\" >&2;; *) echo 'gcc 12';; esac\n"
	write(t, filepath.Join(bin, "cc"), cc, 0o755)
	write(t, filepath.Join(bin, "c++"), "#!/bin/sh\necho 'g++ 12'\n", 0o755)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
	cpuInfo := filepath.Join(t.TempDir(), "cpuinfo")
	setFlags := func(flags string) {
		os.WriteFile(cpuInfo, []byte("processor\t: 0\nflags\t\t: "+flags+"\n"), 0o644)
	}
	key := func(march string) Key {
		t.Helper()
		k, err := MakeKey(context.Background(), KeyInput{Steps: [][]string{{"make"}}, Dir: dir, Env: []string{"PATH=" + bin, "MARCH=" + march}, cpuInfo: cpuInfo})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	setFlags("fpu sse2 avx2")
	first := key("skylake")
	if cpu := inputOf(first, "cpu"); cpu != "native -march=skylake -mavx2 -mno-xop" {
		t.Fatalf("cpu input %q", cpu)
	}
	setFlags("fpu sse2 avx2 hypervisor md_clear")
	if k := key("skylake"); k.Sum != first.Sum {
		t.Errorf("other cpuinfo flags for the same native target changed the key")
	}
	if k := key("znver4"); k.Sum == first.Sum {
		t.Errorf("another native target kept the key")
	}
	noNative := key("")
	if cpu := inputOf(noNative, "cpu"); !strings.HasPrefix(cpu, "flags fpu sse2") {
		t.Fatalf("a compiler that cannot say: cpu input %q, want /proc/cpuinfo's flags", cpu)
	}
	setFlags("fpu sse2")
	if k := key(""); k.Sum == noNative.Sum {
		t.Errorf("with no native target, other cpuinfo flags kept the key")
	}
}

// A recipe that builds portable code (-DGGML_NATIVE=OFF) is keyed on the
// architecture alone: another CPU of it shares the entry.
func TestKeyOfPortableBuildIsTheArchitecture(t *testing.T) {
	bin := t.TempDir()
	cc := "#!/bin/sh\ncase \"$*\" in *-###*) echo \" /x/cc1 \\\"-march=$MARCH\\\"\" >&2;; *) echo 'gcc 12';; esac\n"
	write(t, filepath.Join(bin, "cc"), cc, 0o755)
	write(t, filepath.Join(bin, "c++"), "#!/bin/sh\necho 'g++ 12'\n", 0o755)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
	key := func(march string, steps ...string) Key {
		t.Helper()
		k, err := MakeKey(context.Background(), KeyInput{Steps: [][]string{append([]string{"cmake", "-B", "build"}, steps...)}, Dir: dir, Env: []string{"PATH=" + bin, "MARCH=" + march}})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	portableSteps := []string{"-DGGML_NATIVE=OFF", "-DGGML_BACKEND_DL=ON", "-DGGML_CPU_ALL_VARIANTS=ON"}
	if a, b := key("skylake", portableSteps...), key("znver4", portableSteps...); a.Sum != b.Sum || !strings.HasPrefix(inputOf(a, "cpu"), "arch ") {
		t.Errorf("portable builds on two CPUs: %q and %q", inputOf(a, "cpu"), inputOf(b, "cpu"))
	}
	// GGML_NATIVE=OFF alone turns AVX2 and the like on: not portable.
	if a, b := key("skylake", "-DGGML_NATIVE=OFF"), key("znver4", "-DGGML_NATIVE=OFF"); a.Sum == b.Sum {
		t.Errorf("GGML_NATIVE=OFF alone was keyed as portable: %q", inputOf(a, "cpu"))
	}
	// Nor is a portable build given a -march of its own.
	if a, b := key("skylake", append(portableSteps, "-DCMAKE_C_FLAGS=-march=skylake")...), key("znver4", append(portableSteps, "-DCMAKE_C_FLAGS=-march=skylake")...); a.Sum == b.Sum {
		t.Errorf("a portable build with -march was keyed on the architecture alone")
	}
	if a, b := key("skylake", "-DGGML_NATIVE:BOOL=ON"), key("znver4", "-DGGML_NATIVE:BOOL=ON"); a.Sum == b.Sum {
		t.Errorf("native builds on two CPUs share a key")
	}
}

func inputOf(k Key, name string) string {
	var vals []string
	for _, in := range k.Inputs {
		if in.Name == name {
			vals = append(vals, in.Value)
		}
	}
	return strings.Join(vals, "; ")
}

// CFLAGS and the like, and CMake's own variables, change what a build
// makes: another value misses. A job count does not.
func TestKeyHasTheBuildEnvironment(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
	key := func(env ...string) Key {
		t.Helper()
		k, err := MakeKey(context.Background(), KeyInput{Steps: [][]string{{"make"}}, Dir: dir, Env: append([]string{"PATH=" + os.Getenv("PATH")}, env...)})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	plain := key()
	for _, env := range []string{"CFLAGS=-DX=1", "CXXFLAGS=-O0", "LDFLAGS=-static", "CPPFLAGS=-DY", "CMAKE_BUILD_TYPE=Debug", "CC=cc -m32"} {
		if k := key(env); k.Sum == plain.Sum {
			t.Errorf("%s kept the key", env)
		}
	}
	if k := key("CFLAGS=-DX=1"); inputOf(k, "env") != "CFLAGS=-DX=1" {
		t.Errorf("env input %q", inputOf(k, "env"))
	}
	if k := key("CMAKE_BUILD_PARALLEL_LEVEL=8", "HOME=/elsewhere"); k.Sum != plain.Sum {
		t.Errorf("a job count or an unrelated variable changed the key")
	}
}

// A file .gitignore names is still read by the build (a local.cmake the
// CMakeLists.txt includes): an edit of it misses. What tools write beside
// the sources (Python's __pycache__) does not.
func TestKeyHasIgnoredFiles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed; this test needs it: apt-get install -y git")
	}
	dir := t.TempDir()
	git := gitIn(t, dir)
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("local.cmake\n__pycache__/\nbuild/\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "CMakeLists.txt"), []byte("include(local.cmake OPTIONAL)\n"), 0o644)
	git("add", ".")
	git("commit", "-qm", "one")
	os.WriteFile(filepath.Join(dir, "local.cmake"), []byte("set(X 1)\n"), 0o644)
	first := keyOf(t, dir)
	if !strings.Contains(inputOf(first, "ignored"), "local.cmake") {
		t.Errorf("inputs do not name the ignored file: %+v", first.Inputs)
	}
	os.WriteFile(filepath.Join(dir, "local.cmake"), []byte("set(X 2)\n"), 0o644)
	second := keyOf(t, dir)
	if second.Sum == first.Sum {
		t.Fatalf("an edit of an ignored include kept the key (%s)", second.Source)
	}
	os.MkdirAll(filepath.Join(dir, "__pycache__"), 0o755)
	os.WriteFile(filepath.Join(dir, "__pycache__", "convert.cpython-311.pyc"), []byte("bytecode"), 0o644)
	os.MkdirAll(filepath.Join(dir, "build"), 0o755)
	os.WriteFile(filepath.Join(dir, "build", "x.o"), []byte("o"), 0o644)
	if k := keyOf(t, dir); k.Sum != second.Sum {
		t.Errorf("Python's byte code or an output changed the key: %+v", k.Inputs)
	}
}

// Two different edits inside a submodule are two keys: the superproject's
// diff says only "-dirty" for either.
func TestKeyHasSubmoduleEdits(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed; this test needs it: apt-get install -y git")
	}
	sub := t.TempDir()
	gitIn(t, sub)("init", "-q")
	os.WriteFile(filepath.Join(sub, "ggml.c"), []byte("int g;"), 0o644)
	gitIn(t, sub)("add", ".")
	gitIn(t, sub)("commit", "-qm", "sub")
	dir := t.TempDir()
	git := gitIn(t, dir)
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "main.c"), []byte("int m;"), 0o644)
	git("-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "ggml")
	git("add", ".")
	git("commit", "-qm", "one")
	clean := keyOf(t, dir)
	if strings.Contains(clean.Source, "dirty") {
		t.Fatalf("a fresh checkout with a submodule is dirty: %q", clean.Source)
	}
	os.WriteFile(filepath.Join(dir, "ggml", "ggml.c"), []byte("int g = 1;"), 0o644)
	one := keyOf(t, dir)
	os.WriteFile(filepath.Join(dir, "ggml", "ggml.c"), []byte("int g = 2;"), 0o644)
	two := keyOf(t, dir)
	if one.Sum == clean.Sum || two.Sum == one.Sum {
		t.Errorf("submodule edits: clean %s, one %s, two %s", clean.Source, one.Source, two.Source)
	}
	if !strings.HasPrefix(inputOf(two, "submodule"), "ggml: git ") {
		t.Errorf("submodule input %q", inputOf(two, "submodule"))
	}
	// A file the submodule ignores: the superproject sees nothing at all.
	gitIn(t, filepath.Join(dir, "ggml"))("checkout", "-q", "--", "ggml.c")
	exclude, err := exec.Command("git", "-C", filepath.Join(dir, "ggml"), "rev-parse", "--path-format=absolute", "--git-path", "info/exclude").Output()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(strings.TrimSpace(string(exclude))), 0o755)
	if err := os.WriteFile(strings.TrimSpace(string(exclude)), []byte("local.cmake\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "ggml", "local.cmake"), []byte("set(A 1)"), 0o644)
	if out, _ := exec.Command("git", "-C", filepath.Join(dir, "ggml"), "status", "--porcelain", "--ignored").Output(); !strings.Contains(string(out), "!! local.cmake") {
		t.Fatalf("local.cmake is not ignored in the submodule: %q", out)
	}
	ign1 := keyOf(t, dir)
	os.WriteFile(filepath.Join(dir, "ggml", "local.cmake"), []byte("set(A 2)"), 0o644)
	ign2 := keyOf(t, dir)
	if ign1.Sum == clean.Sum || ign2.Sum == ign1.Sum {
		t.Errorf("edits of a file the submodule ignores: clean %s, one %s, two %s", clean.Source, ign1.Source, ign2.Source)
	}
}

// A git checkout nested in dir that the superproject does not track (a
// library cloned there, ignored or not): git lists its folder only, and
// its edits still change the key.
func TestKeyHasNestedCheckoutEdits(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed; this test needs it: apt-get install -y git")
	}
	dir := t.TempDir()
	git := gitIn(t, dir)
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("vendor/\n"), 0o644)
	git("add", ".")
	git("commit", "-qm", "one")
	lib := filepath.Join(dir, "vendor", "lib")
	os.MkdirAll(lib, 0o755)
	gitIn(t, lib)("init", "-q")
	os.WriteFile(filepath.Join(lib, "lib.c"), []byte("int l;"), 0o644)
	gitIn(t, lib)("add", ".")
	gitIn(t, lib)("commit", "-qm", "lib")
	first := keyOf(t, dir)
	os.WriteFile(filepath.Join(lib, "lib.c"), []byte("int l = 1;"), 0o644)
	second := keyOf(t, dir)
	if second.Sum == first.Sum {
		t.Errorf("an edit inside a nested checkout kept the key (%s)", second.Source)
	}
}

// gitIn runs git in dir, as a test's committer.
func gitIn(t *testing.T, dir string) func(args ...string) {
	return func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

func TestKeyOfGitTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := gitIn(t, dir)
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
	git("add", ".")
	git("commit", "-qm", "one")
	clean := keyOf(t, dir)
	if !strings.HasPrefix(clean.Source, "git ") || strings.Contains(clean.Source, "dirty") {
		t.Fatalf("source %q, want a clean git revision", clean.Source)
	}
	os.MkdirAll(filepath.Join(dir, "build"), 0o755)
	os.WriteFile(filepath.Join(dir, "build", "x.o"), []byte("o"), 0o644)
	if k := keyOf(t, dir); k.Sum != clean.Sum {
		t.Errorf("an untracked output made the tree dirty: %q", k.Source)
	}
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int b;"), 0o644)
	dirty := keyOf(t, dir)
	if dirty.Sum == clean.Sum || !strings.Contains(dirty.Source, "dirty") {
		t.Errorf("an edit kept the key: %q", dirty.Source)
	}
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int c;"), 0o644)
	if k := keyOf(t, dir); k.Sum == dirty.Sum {
		t.Errorf("another edit kept the dirty key")
	}
	git("commit", "-qam", "two")
	if k := keyOf(t, dir); k.Sum == clean.Sum || strings.Contains(k.Source, "dirty") {
		t.Errorf("a new commit: %q", k.Source)
	}
}

// A recipe's dir may be a folder inside a checkout (a monorepo, a home
// folder kept in git): git status names the untracked files from the
// checkout's top, and their contents still decide the key.
func TestKeyOfGitSubfolderHashesUntracked(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	top := t.TempDir()
	dir := filepath.Join(top, "sub")
	os.MkdirAll(dir, 0o755)
	git := gitIn(t, top)
	git("init", "-q")
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
	git("add", ".")
	git("commit", "-qm", "one")
	os.WriteFile(filepath.Join(dir, "new.c"), []byte("int n;"), 0o644)
	first := keyOf(t, dir)
	if !strings.Contains(first.Source, "dirty") {
		t.Fatalf("source %q, want a dirty git revision", first.Source)
	}
	os.WriteFile(filepath.Join(dir, "new.c"), []byte("int m;"), 0o644)
	if k := keyOf(t, dir); k.Sum == first.Sum {
		t.Errorf("an edit of an untracked source below a subfolder of the checkout kept the key (%q)", k.Source)
	}
}

// The compilers are found from what is there before the build runs (the
// steps' -DCMAKE_C_COMPILER=, then CC and CXX, then cc and c++ on PATH),
// so the key a heal computes with build/ evicted is the one the build was
// stashed under, when CMake's cache was there: a recipe built with clang
// (CC=clang, or in its steps) was stashed under clang's version and looked
// up under cc's, and never restored after an eviction.
func TestKeyNamesTheCompilersBeforeAndAfterTheBuild(t *testing.T) {
	bin := t.TempDir()
	for name, version := range map[string]string{"cc": "gcc 12", "c++": "g++ 12", "clang": "clang 17", "clang++": "clang++ 17"} {
		write := "#!/bin/sh\necho '" + version + "'\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(write), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		steps [][]string
		env   []string
	}{
		{"CC and CXX", [][]string{{"cmake", "-B", "build"}}, []string{"CC=clang", "CXX=clang++"}},
		{"the steps", [][]string{{"cmake", "-B", "build", "-DCMAKE_C_COMPILER=clang", "-DCMAKE_CXX_COMPILER:FILEPATH=" + filepath.Join(bin, "clang++")}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
			in := KeyInput{Steps: c.steps, Dir: dir, Outputs: []string{"build"}, Env: append([]string{"PATH=" + bin}, c.env...)}
			evicted, err := MakeKey(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if evicted.Compiler != "clang 17" {
				t.Errorf("compiler %q before the build, want clang 17", evicted.Compiler)
			}
			os.MkdirAll(filepath.Join(dir, "build"), 0o755)
			cache := "CMAKE_C_COMPILER:FILEPATH=" + filepath.Join(bin, "clang") + "\nCMAKE_CXX_COMPILER:FILEPATH=" + filepath.Join(bin, "clang++") + "\n"
			os.WriteFile(filepath.Join(dir, "build", "CMakeCache.txt"), []byte(cache), 0o644)
			built, err := MakeKey(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if built.Sum != evicted.Sum {
				t.Errorf("the key after the build (compiler %q) is not the one with build/ evicted (%q)", built.Compiler, evicted.Compiler)
			}
		})
	}
}

// A model kept beside the sources (~/llama.cpp/models/x.gguf) is the kind
// of file a sandbox evicts: neither its presence nor its content is part
// of the key, in a plain folder or as an untracked file of a git checkout,
// so its eviction does not make the stash miss. A small untracked file is
// a source and still counts.
func TestKeyLeavesOutFilesTooLargeForSources(t *testing.T) {
	for _, withGit := range []bool{false, true} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "a.c"), []byte("int a;"), 0o644)
		if withGit {
			git := gitIn(t, dir)
			git("init", "-q")
			git("add", "a.c")
			git("commit", "-qm", "a")
		}
		before := keyOf(t, dir)
		model := filepath.Join(dir, "models", "big.gguf")
		os.MkdirAll(filepath.Dir(model), 0o755)
		f, err := os.Create(model)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(maxSourceBytes) // sparse: no 16 MiB written
		f.Close()
		if k := keyOf(t, dir); k.Sum != before.Sum {
			t.Errorf("git %v: a model beside the sources changed the key (%s, was %s)", withGit, k.Source, before.Source)
		}
		os.WriteFile(filepath.Join(dir, "b.c"), []byte("int b;"), 0o644)
		withSource := keyOf(t, dir)
		if withSource.Sum == before.Sum {
			t.Errorf("git %v: a new source kept the key", withGit)
		}
		os.Remove(model)
		if k := keyOf(t, dir); k.Sum != withSource.Sum {
			t.Errorf("git %v: evicting the model changed the key", withGit)
		}
	}
}
