package elfpath

import (
	"bytes"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// linked builds a program with the given -rpath folders, as CMake's build
// RPATH does (--enable-new-dtags: DT_RUNPATH; without: DT_RPATH).
func linked(t testing.TB, runpath bool, dirs ...string) []byte {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc) to link a test program with")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-o", filepath.Join(dir, "prog"), src}
	tags := "-Wl,--disable-new-dtags"
	if runpath {
		tags = "-Wl,--enable-new-dtags"
	}
	args = append(args, tags)
	for _, d := range dirs {
		args = append(args, "-Wl,-rpath,"+d)
	}
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(dir, "prog"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// intoBuild is a recipe's origin for a program in /src/llama.cpp/build/bin:
// its outputs are /src/llama.cpp/build.
func intoBuild(d string) (string, string) {
	switch {
	case d == "/src/llama.cpp/build/bin":
		return "$ORIGIN", ""
	case strings.HasPrefix(d, "/src/llama.cpp/build/"):
		return "$ORIGIN/../" + strings.TrimPrefix(d, "/src/llama.cpp/build/"), ""
	case strings.HasPrefix(d, "/src/llama.cpp/"):
		return "", "outside the outputs"
	}
	return "", ""
}

func patch(data []byte, plan Result) []byte {
	out, _ := io.ReadAll(Apply(bytes.NewReader(data), plan.Patches))
	return out
}

func paths(t *testing.T, data []byte) (rpath, runpath []string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	rpath, _ = f.DynString(elf.DT_RPATH)
	runpath, _ = f.DynString(elf.DT_RUNPATH)
	return rpath, runpath
}

// TestPlanRewritesIntoTheOutputs: the folders in the outputs become
// $ORIGIN-relative, in place; a system folder stays; the file keeps its
// size, and nothing else of it changes.
func TestPlanRewritesIntoTheOutputs(t *testing.T) {
	for _, runpath := range []bool{true, false} {
		data := linked(t, runpath, "/src/llama.cpp/build/bin", "/opt/cuda/lib64", "/src/llama.cpp/build/ggml/src")
		plan, err := Plan(bytes.NewReader(data), intoBuild)
		if err != nil || len(plan.Patches) != 1 || len(plan.Kept) != 0 {
			t.Fatalf("runpath %v: plan %+v, %v; want one patch", runpath, plan, err)
		}
		out := patch(data, plan)
		if len(out) != len(data) {
			t.Fatalf("the size changed: %d, was %d", len(out), len(data))
		}
		rp, rn := paths(t, out)
		got := append(rp, rn...)
		if want := "$ORIGIN:/opt/cuda/lib64:$ORIGIN/../ggml/src"; len(got) != 1 || got[0] != want {
			t.Errorf("runpath %v: after the rewrite %q, want %q", runpath, got, want)
		}
		diff := 0
		for i := range data {
			if data[i] != out[i] {
				diff++
			}
		}
		if p := plan.Patches[0]; diff > len(p.Data) {
			t.Errorf("%d bytes changed, more than the %d of the path", diff, len(p.Data))
		}
	}
}

// TestPlanKeepsWhatCannotMove: a folder of the checkout outside the
// outputs, and a rewrite that would be longer, stay as they are and say
// why.
func TestPlanKeepsWhatCannotMove(t *testing.T) {
	data := linked(t, true, "/src/llama.cpp/ext/lib", "/b")
	plan, err := Plan(bytes.NewReader(data), func(d string) (string, string) {
		if d == "/b" {
			return "$ORIGIN/../../b", ""
		}
		return intoBuild(d)
	})
	if err != nil || len(plan.Patches) != 0 || len(plan.Kept) != 2 {
		t.Fatalf("plan %+v, %v; want no patch and two kept", plan, err)
	}
	if !strings.Contains(plan.Kept[0], "/src/llama.cpp/ext/lib: outside the outputs") || !strings.Contains(plan.Kept[1], "would not fit in place") {
		t.Errorf("kept: %q", plan.Kept)
	}
}

// TestPlanNotELF: a script, or nothing, needs no patch.
func TestPlanNotELF(t *testing.T) {
	for _, data := range [][]byte{nil, []byte("#!/bin/sh\necho hi\n"), []byte("\x7fELF")} {
		if plan, err := Plan(bytes.NewReader(data), intoBuild); err != nil || len(plan.Patches) != 0 {
			t.Errorf("%q: %+v, %v", data, plan, err)
		}
	}
}

// FuzzPlan: whatever a file holds, Plan neither panics nor returns a patch
// outside the file, or one that writes more than a path's bytes.
func FuzzPlan(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	if _, err := exec.LookPath("cc"); err == nil {
		f.Add(linked(f, true, "/src/llama.cpp/build/bin"))
		f.Add(linked(f, false, "/src/llama.cpp/build/bin:/x"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		plan, err := Plan(bytes.NewReader(data), intoBuild)
		if err != nil {
			return
		}
		for _, p := range plan.Patches {
			if p.Off < 0 || p.Off+int64(len(p.Data)) > int64(len(data)) {
				t.Fatalf("patch at %d of %d bytes, outside a file of %d", p.Off, len(p.Data), len(data))
			}
			if bytes.IndexByte(data[p.Off:p.Off+int64(len(p.Data))], 0) >= 0 {
				t.Fatalf("patch at %d writes over a NUL: past the string it replaces", p.Off)
			}
		}
		if out := patch(data, plan); len(out) != len(data) {
			t.Fatalf("patched size %d, was %d", len(out), len(data))
		}
	})
}
