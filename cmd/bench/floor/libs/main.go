// Command libs is the deps floor shim plus the package initialisation of
// every other library guard links (go-toml, klauspost/compress, debug/elf,
// encoding/json, regexp, x/sys, x/term, ...), none of guard's own code:
// guard's exec path against this row is what guard's own code costs;
// this row against the deps floor is what those libraries cost before
// main.
//
// It execs $SHIM_TARGET with its own argv and environment.
package main

import (
	"os"
	"syscall"

	_ "crypto/sha256"
	_ "debug/elf"
	_ "encoding/json"
	_ "hash/crc32"
	_ "math/rand/v2"
	_ "net/http"
	_ "os/exec"
	_ "os/signal"
	_ "regexp"
	_ "runtime/debug"
	_ "text/tabwriter"

	_ "github.com/creack/pty"
	_ "github.com/gofrs/flock"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/pelletier/go-toml/v2"
	_ "github.com/urfave/cli/v2"
	_ "go.uber.org/zap"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
)

func main() {
	target := os.Getenv("SHIM_TARGET")
	if target == "" {
		os.Stderr.WriteString("libs: SHIM_TARGET is not set\n")
		os.Exit(127)
	}
	err := syscall.Exec(target, os.Args, os.Environ())
	// Exec returns only on failure.
	os.Stderr.WriteString("libs: exec " + target + ": " + err.Error() + "\n")
	os.Exit(126)
}
