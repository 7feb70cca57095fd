package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// initBudget is what one package may build when a guard process starts:
// Go initialises every package a binary links before main, whatever the
// call needs, so a shim call pays for each (docs/BENCHMARKS.md, "Why the
// start-up goals are missed"). It is counted in bytes and allocations,
// as GODEBUG=inittrace=1 reports them, not in time: the machine's load
// moves the clock, not these.
type initBudget struct{ bytes, allocs int }

// defaultInitBudget is a package's: a few error values and small
// literals, no regular expression, table or map.
var defaultInitBudget = initBudget{bytes: 1024, allocs: 24}

// initAllowed names the packages over the default and their own ceiling
// (about twice what they build today), each for a reason: all but the
// last three are Go's standard library, which the same-libraries floor
// of cmd/bench links too.
var initAllowed = map[string]initBudget{
	"unicode":                             {24 << 10, 32}, // its category and script tables
	"net/http":                            {10 << 10, 100},
	"net":                                 {4 << 10, 48},
	"crypto/tls":                          {5 << 10, 32},
	"crypto/internal/fips140/rsa":         {7 << 10, 48},
	"vendor/golang.org/x/net/http2/hpack": {16 << 10, 16}, // the static header table
	"vendor/golang.org/x/sys/cpu":         {10 << 10, 20},
	"debug/dwarf":                         {14 << 10, 8}, // debug/elf's, which guard/builds reads binaries with
	"compress/flate":                      {9 << 10, 14}, // its fixed Huffman tables
	"regexp/syntax":                       {5 << 10, 12},
	"encoding/base64":                     {3 << 10, 8},
	"hash/crc32":                          {3 << 10, 10},
	"github.com/urfave/cli/v2":            {8 << 10, 70}, // the product owner's CLI library: its flags, help command and templates
	"go.uber.org/zap/zapcore":             {3 << 10, 90}, // the product owner's logger: its level names
	"github.com/klauspost/compress/internal/snapref": {18 << 10, 6}, // a CRC table; zstd links it, stash entries are zstd (docs/stash.md)
}

// TestShimPathInitBudget holds every package of a release build to its
// init budget: a healthy shim call (here `guard --version`, which does
// nothing but start) builds no regular expression, table or map it does
// not use. oras-go's registry package (127 KiB, 1,783 allocations: its
// reference regexps) and go-digest (90 KiB) failed it.
func TestShimPathInitBudget(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "guard")
	if err := os.WriteFile(exe, guardBinary(t), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(exe, "--version")
	cmd.Env = []string{"GODEBUG=inittrace=1", "HOME=" + home, "PATH=/usr/bin:/bin", "GUARD_STATE_DIR=" + filepath.Join(home, "state"), "GUARD_LOG=" + filepath.Join(home, "selfheal.log"), "GUARD_SHIM_DIR=" + filepath.Join(home, ".shim"), "GUARD_CACHE=" + filepath.Join(home, "cache")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("guard --version: %v\n%s", err, stderr.String())
	}
	seen := 0
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		pkg, b, allocs, ok := parseInitTrace(sc.Text())
		if !ok {
			continue
		}
		seen++
		budget, named := initAllowed[pkg]
		if !named {
			budget = defaultInitBudget
		}
		if b > budget.bytes || allocs > budget.allocs {
			t.Errorf("%s builds %d bytes in %d allocations when a guard process starts, over its budget of %d bytes and %d allocations: build it when first used (docs/BENCHMARKS.md)", pkg, b, allocs, budget.bytes, budget.allocs)
		}
	}
	if seen < 20 {
		t.Fatalf("read %d inittrace lines; GODEBUG=inittrace=1 printed:\n%s", seen, stderr.String())
	}
}

// parseInitTrace reads "init PKG @0.12 ms, 0.01 ms clock, 312 bytes, 7 allocs".
func parseInitTrace(line string) (pkg string, bytes, allocs int, ok bool) {
	f := strings.Fields(line)
	if len(f) != 11 || f[0] != "init" || f[8] != "bytes," || f[10] != "allocs" {
		return "", 0, 0, false
	}
	b, err1 := strconv.Atoi(f[7])
	a, err2 := strconv.Atoi(f[9])
	return f[1], b, a, err1 == nil && err2 == nil
}

func TestParseInitTrace(t *testing.T) {
	pkg, b, a, ok := parseInitTrace("init oras.land/oras-go/v2/registry @1.9 ms, 2.1 ms clock, 129768 bytes, 1783 allocs")
	if !ok || pkg != "oras.land/oras-go/v2/registry" || b != 129768 || a != 1783 {
		t.Fatalf("%q %d %d %v", pkg, b, a, ok)
	}
	if _, _, _, ok := parseInitTrace("guard 1.2.3"); ok {
		t.Fatal("read a line that is not inittrace's")
	}
}
