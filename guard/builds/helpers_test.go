package builds_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/manifest"
)

// fixtureSrc is the CMake project standing in for llama.cpp.
const fixtureSrc = "../../testdata/cmake-fixture"

// fixtureRoot holds the fixture built once per test binary, for the tests
// that only need its outputs; TestMain removes it.
var (
	fixtureOnce sync.Once
	fixtureRoot string
	fixtureErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runBuildHelper())
	}
	code := m.Run()
	if fixtureRoot != "" {
		os.RemoveAll(fixtureRoot)
	}
	os.Exit(code)
}

// fixtureRecipe is the manifest recipe of the fixture in dir, as the
// llama.cpp recipe would be written.
func fixtureRecipe(dir string) *manifest.Build {
	return &manifest.Build{
		Name:  "fixture",
		Dir:   dir,
		Needs: []string{"cmake"},
		Steps: [][]string{
			{"cmake", "-B", "build", "-DCMAKE_BUILD_TYPE=Release"},
			{"cmake", "--build", "build", "-j2"},
		},
		Outputs: []string{manifest.DefaultOutput}, // as manifest.Parse fills it in
	}
}

// builtFixtureBin returns a folder holding the fixture's programs and
// library, compiled once with cc (no cmake: the CheckBinary tests need only
// the ELF files, linked as CMake links them, through an $ORIGIN RUNPATH).
// Callers copy what they need and never modify it.
func builtFixtureBin(t testing.TB) string {
	t.Helper()
	fixtureOnce.Do(func() {
		fixtureRoot, fixtureErr = os.MkdirTemp("", "guard-builds-fixture-")
		if fixtureErr != nil {
			return
		}
		src, _ := filepath.Abs(fixtureSrc)
		bin := filepath.Join(fixtureRoot, "bin")
		if fixtureErr = os.Mkdir(bin, 0o755); fixtureErr != nil {
			return
		}
		cmds := [][]string{{"cc", "-shared", "-fPIC", "-o", filepath.Join(bin, "libfixture.so"), filepath.Join(src, "fixture.c")}}
		for _, tool := range []string{"llama-completion", "llama-simple"} {
			cmds = append(cmds, []string{"cc", `-DTOOL_NAME="` + tool + `"`, "-o", filepath.Join(bin, tool), filepath.Join(src, "main.c"),
				"-L" + bin, "-lfixture", "-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags"})
		}
		for _, c := range cmds {
			if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				fixtureErr = fmt.Errorf("%v: %v\n%s", c, err, out)
				return
			}
		}
	})
	if fixtureErr != nil {
		t.Fatalf("compile fixture: %v", fixtureErr)
	}
	return filepath.Join(fixtureRoot, "bin")
}

// requireCmake fails rather than skips: CI installs cmake (.ci/run).
func requireCmake(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("cmake"); err != nil {
		t.Fatal("cmake is not installed; these tests need it: apt-get install -y cmake")
	}
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		return copyFile(p, to)
	})
}

func copyFile(from, to string) error {
	fi, err := os.Stat(from)
	if err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// testEnv is the process environment with HOME moved to a temp folder and
// PATH replaced by path (when not empty).
func testEnv(t testing.TB, path string) []string {
	env := []string{"HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HOME=") || (path != "" && strings.HasPrefix(kv, "PATH=")) {
			continue
		}
		env = append(env, kv)
	}
	if path != "" {
		env = append(env, "PATH="+path)
	}
	return env
}

func newBuilder(t testing.TB, path string) (*builds.Builder, *guardtest.Buffer, *guardtest.Recorder) {
	stderr, evs := &guardtest.Buffer{}, &guardtest.Recorder{}
	return &builds.Builder{
		StateDir: t.TempDir(),
		Log:      evs.Log,
		Stderr:   stderr,
		Env:      testEnv(t, path),
	}, stderr, evs
}
