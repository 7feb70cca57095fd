package builds_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/guardtest"
	"github.com/sandbox-guard/guard/manifest"
)

// helperEnv makes the test binary a guard stand-in that runs one Build (see
// runBuildHelper) instead of the tests.
const helperEnv = "GUARD_BUILDS_TEST_HELPER"

// runBuildHelper builds the recipe "orphan" in $GUARD_BUILDS_TEST_DIR with
// state in $GUARD_BUILDS_TEST_STATE, its one step being sh step.sh, or
// the recipe manyRecipe makes when $GUARD_BUILDS_TEST_MANY is set.
func runBuildHelper() int {
	b := &builds.Builder{StateDir: os.Getenv("GUARD_BUILDS_TEST_STATE"), Stderr: os.Stderr}
	rec := &manifest.Build{Name: "orphan", Dir: os.Getenv("GUARD_BUILDS_TEST_DIR"), Steps: [][]string{{"sh", "step.sh"}}}
	if os.Getenv("GUARD_BUILDS_TEST_MANY") != "" {
		rec = manyRecipe(rec.Dir)
	}
	if err := b.Build(context.Background(), "helper", rec, ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestBuildLockOutlivesKilledGuard kills guard alone (its build step, in a
// process group of its own, goes on) and checks that the next Build waits
// for the orphaned step instead of running the recipe beside it.
func TestBuildLockOutlivesKilledGuard(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	// The first run's step waits for the test's go-ahead (bounded), then
	// records that it ended; the second run records whether it started
	// after that.
	guardtest.WriteFile(t, filepath.Join(dir, "step.sh"), `if [ -e first-done ]; then
  if [ -e go-ahead ]; then echo after > order; else echo concurrent > order; fi
  exit 0
fi
echo $$ > started
i=0
while [ ! -e go-ahead ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
echo done > first-done
`, 0o644)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=1", "GUARD_BUILDS_TEST_STATE="+state, "GUARD_BUILDS_TEST_DIR="+dir)
	var helperErr strings.Builder
	helper.Stderr = &helperErr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	stepPID := waitForFile(t, filepath.Join(dir, "started"))
	t.Cleanup(func() { _ = syscall.Kill(-stepPID, syscall.SIGKILL) })
	if err := helper.Process.Kill(); err != nil { // guard alone, not the step's group
		t.Fatal(err)
	}
	_ = helper.Wait()
	if syscall.Kill(stepPID, 0) != nil {
		t.Fatalf("the step died with guard; helper stderr:\n%s", helperErr.String())
	}

	b, stderr, evs := newBuilder(t, "")
	b.StateDir = state
	b.HealTimeout = time.Minute // a bound, not an expectation
	rec := &manifest.Build{Name: "orphan", Dir: dir, Steps: [][]string{{"sh", "step.sh"}}}
	done := make(chan error, 1)
	go func() { done <- b.Build(context.Background(), "x", rec, "") }()
	deadline := time.Now().Add(30 * time.Second)
	for len(evs.Named("lock.wait")) == 0 {
		select {
		case err := <-done:
			t.Fatalf("the second Build did not wait for the orphaned step (err %v); stderr:\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the second Build neither waited nor returned")
		}
	}
	guardtest.WriteFile(t, filepath.Join(dir, "go-ahead"), "go\n", 0o644) // not empty: the scrub would take it for an output
	if err := <-done; err != nil {
		t.Fatalf("second Build: %v", err)
	}
	if order, _ := os.ReadFile(filepath.Join(dir, "order")); string(order) != "after\n" {
		log, _ := os.ReadFile(b.LogPath("orphan"))
		t.Fatalf("the second run of the recipe ran %q; want after the orphaned step\nstderr:\n%s\nlog:\n%s", order, stderr.String(), log)
	}
	// The killed run left its marker: the second run says so.
	if !strings.Contains(stderr.String(), "guard: the last build of orphan was interrupted") {
		t.Fatalf("stderr:\n%s", stderr.String())
	}
	waitGone(t, stepPID)
}

// waitForFile waits for a file holding a pid and returns it.
func waitForFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
	return 0
}
