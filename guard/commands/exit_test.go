package commands

import (
	"errors"
	"slices"
	"testing"

	"github.com/sandbox-guard/guard/guard/models"
)

// code is the status err asks for: 0 for nil, else its ExitCode.
func code(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("%v is not an ExitError", err)
	}
	return ee.ExitCode()
}

func TestHealJobExit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		ok      bool
		err     error
		code    int
		message string
	}{
		{"healed", true, nil, 0, ""},
		{"heal failed: the record says why", false, nil, 1, ""},
		{"guard failed", false, errors.New("heal --job: no job lock on fd 3"), 1, "heal --job: no job lock on fd 3"},
	}
	for _, c := range cases {
		err := HealJobExit(c.ok, c.err)
		if got := code(t, err); got != c.code {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.code)
		}
		if err != nil && err.Error() != c.message {
			t.Errorf("%s: says %q, want %q", c.name, err.Error(), c.message)
		}
	}
}

func TestAfterWait(t *testing.T) {
	t.Parallel()
	stalled := &models.StalledError{Model: "m.gguf", Err: errors.New("no byte in 60s")}
	other := errors.New("the heal of npx failed")
	cases := []struct {
		name     string
		names    []string
		followed int
		err      error
		done     bool
		code     int
		say      []string
	}{
		{"named, waited", []string{"npx"}, 1, nil, false, 0, nil},
		{"named, nothing to wait for: heal it here", []string{"npx"}, 0, nil, false, 0, nil},
		{"named, the heal failed: said, then healed here", []string{"npx"}, 1, other, false, 0, []string{other.Error()}},
		{"named, stuck: 75, no heal here", []string{"m.gguf"}, 1, stalled, true, 75, nil},
		{"alone, stuck: 75", nil, 1, stalled, true, 75, nil},
		{"alone, waited", nil, 2, nil, true, 0, nil},
		{"alone, nothing running", nil, 0, nil, true, 0, []string{"no heal is running in the background; nothing to wait for"}},
		{"alone, a heal failed: 1", nil, 1, other, true, 1, []string{other.Error()}},
	}
	for _, c := range cases {
		v := AfterWait(c.names, c.followed, c.err)
		if v.Done != c.done {
			t.Errorf("%s: done %v, want %v", c.name, v.Done, c.done)
		}
		if got := code(t, v.Exit); got != c.code {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.code)
		}
		if !slices.Equal(v.Say, c.say) {
			t.Errorf("%s: says %q, want %q", c.name, v.Say, c.say)
		}
		if !v.Done && v.Exit != nil {
			t.Errorf("%s: an exit %v without done", c.name, v.Exit)
		}
	}
	if v := AfterWait(nil, 1, stalled); v.Exit.Error() != stalled.Error() {
		t.Errorf("a stuck heal says %q, want its own message %q", v.Exit.Error(), stalled.Error())
	}
}

func TestHealAndStatusExit(t *testing.T) {
	t.Parallel()
	if got := code(t, HealExit(true)); got != 0 {
		t.Errorf("healed: exit %d, want 0", got)
	}
	if err := HealExit(false); code(t, err) != 1 || err.Error() != "some things could not be healed (see above)" {
		t.Errorf("not healed: %v (exit %d), want exit 1 with the summary line", err, code(t, err))
	}
	for _, c := range []struct {
		healthy bool
		err     error
		code    int
	}{{true, nil, 0}, {false, nil, 1}, {true, errors.New("cannot read the log"), 125}, {false, errors.New("x"), 125}} {
		if got := code(t, StatusExit(c.healthy, c.err)); got != c.code {
			t.Errorf("status healthy=%v err=%v: exit %d, want %d", c.healthy, c.err, got, c.code)
		}
	}
}
