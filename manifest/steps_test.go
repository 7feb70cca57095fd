package manifest_test

import (
	"reflect"
	"runtime"
	"strconv"
	"testing"

	"github.com/sandbox-guard/guard/manifest"
)

// {targets} becomes the file names of the recipe's tools' paths (each
// once, sorted), or the targets key when the recipe has one; {jobs}
// becomes runtime.NumCPU anywhere in an argument. Braces that are not a
// placeholder (the shell's ${VAR} and {a,b}, find's {}) are left alone.
func TestExpandedSteps(t *testing.T) {
	jobs := strconv.Itoa(runtime.NumCPU())
	m, err := manifest.Parse("m.toml", []byte(`
[builds.b]
dir = "/src"
steps = [
  ["cmake", "--build", "build", "--target", "{targets}", "-j{jobs}"],
  ["sh", "-c", "echo ${HOME} {a,b} {} | awk '{print}' | sed '/x/{p}'", "--jobs={jobs}/{jobs}"],
]
[builds.listed]
dir = "/src"
steps = [["make", "{targets}"]]
targets = ["lib", "app"]
[tools.two]
path = "/src/build/bin/llama-simple"
build = "b"
[tools.one]
path = "/src/build/bin/llama-completion"
build = "b"
[tools.again]
path = "/elsewhere/llama-simple"
build = "b"
[tools.other]
path = "/src/build/bin/llama-bench"
build = "listed"
[tools.npx]
package = "npm"
`), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		build string
		want  [][]string
	}{
		{"b", [][]string{
			{"cmake", "--build", "build", "--target", "llama-completion", "llama-simple", "-j" + jobs},
			{"sh", "-c", "echo ${HOME} {a,b} {} | awk '{print}' | sed '/x/{p}'", "--jobs=" + jobs + "/" + jobs},
		}},
		{"listed", [][]string{{"make", "lib", "app"}}},
	} {
		b := m.Builds[tt.build]
		if got := b.ExpandedSteps(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: ExpandedSteps = %q, want %q", tt.build, got, tt.want)
		}
	}
	wantKey := []string{"cmake", "--build", "build", "--target", "llama-completion", "llama-simple", "-j{jobs}"}
	if got := m.Builds["b"].ResultSteps()[0]; !reflect.DeepEqual(got, wantKey) {
		t.Errorf("ResultSteps()[0] = %q, want %q: the job count does not decide what a build makes", got, wantKey)
	}
	if s := m.Builds["b"].Steps[0][4]; s != "{targets}" {
		t.Errorf("ExpandedSteps changed the recipe's own steps: %q", s)
	}
}

// The default recipe builds what the default tools run, with every CPU.
func TestDefaultBuildsItsToolsTargets(t *testing.T) {
	m, err := manifest.Parse(manifest.EmbeddedSource, manifest.DefaultTOML(), "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	steps := m.Builds["llama-cpp"].ExpandedSteps()
	want := []string{"cmake", "--build", "build", "--target", "llama-completion", "llama-simple", "-j" + strconv.Itoa(runtime.NumCPU())}
	if len(steps) != 2 || !reflect.DeepEqual(steps[1], want) {
		t.Fatalf("the default recipe's build step is %q, want %q", steps[len(steps)-1], want)
	}
}
