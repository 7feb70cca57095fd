package units

import "testing"

func TestBytes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{4096, "4.0 KiB"},
		{420086080, "400.6 MiB"},
		{2469606195, "2.3 GiB"},
		{3 << 40, "3.0 TiB"},
		{5 << 50, "5120.0 TiB"},
	} {
		if got := Bytes(c.n); got != c.want {
			t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		done, total int64
		want        string
	}{
		{0, 4096, "0.0/4.0 KiB"},
		{210 << 20, 420086080, "210.0/400.6 MiB"},
		{10, 100, "10/100 B"},
	} {
		if got := Of(c.done, c.total); got != c.want {
			t.Errorf("Of(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
}

func TestRate(t *testing.T) {
	t.Parallel()
	if got := Rate(12.3 * (1 << 20)); got != "12.3 MiB/s" {
		t.Errorf("Rate = %q", got)
	}
	if got := Rate(800); got != "800 B/s" {
		t.Errorf("Rate = %q", got)
	}
}

func TestCount(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 files"}, {1, "1 file"}, {2, "2 files"}} {
		if got := Count(c.n, "file", "files"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Count(1, "library", "libraries"); got != "1 library" {
		t.Errorf("Count(1, library) = %q", got)
	}
}
