package promptcache_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/sandbox-guard/guard/guard/promptcache"
)

// helperEnv makes the test binary act as one more process using the cache.
const helperEnv = "GUARD_CACHE_TEST_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(helper(dir))
	}
	os.Exit(m.Run())
}

// helper hits one key and misses another, a fixed number of times each.
func helper(dir string) int {
	n, _ := strconv.Atoi(os.Getenv("GUARD_CACHE_TEST_ROUNDS"))
	s := &promptcache.Store{Dir: dir}
	for i := 0; i < n; i++ {
		if _, ok, err := s.Get(keyOf("shared")); err != nil || !ok {
			fmt.Fprintf(os.Stderr, "hit %d: ok=%v err=%v\n", i, ok, err)
			return 1
		}
		if _, _, err := s.Get(keyOf("absent")); err != nil {
			fmt.Fprintf(os.Stderr, "miss %d: %v\n", i, err)
			return 1
		}
	}
	return 0
}

func TestCountersExactAcrossProcesses(t *testing.T) {
	s, _ := newStore(t)
	s.Now = nil
	if err := s.Put(keyOf("shared"), promptcache.Entry{Stdout: []byte("shared answer"), Seconds: 0.5}); err != nil {
		t.Fatal(err)
	}
	const procs, rounds = 4, 50
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+s.Dir, "GUARD_CACHE_TEST_ROUNDS="+strconv.Itoa(rounds))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Hits != procs*rounds || st.Misses != procs*rounds || st.SavedSeconds != procs*rounds*0.5 {
		t.Fatalf("Stats = %+v, want %d hits, %d misses, %v s saved", st, procs*rounds, procs*rounds, procs*rounds*0.5)
	}
}
