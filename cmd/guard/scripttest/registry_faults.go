package scripttest

import (
	"strconv"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sandbox-guard/guard/guard/guardtest"
)

// registries is each script's registry (the registry command's).
var registries sync.Map // *testscript.TestScript -> *guardtest.Registry

func scriptRegistry(ts *testscript.TestScript) *guardtest.Registry {
	r, ok := registries.Load(ts)
	if !ok {
		ts.Fatalf("no registry: run the registry command first")
	}
	return r.(*guardtest.Registry)
}

// registryfault tamper OFFSET | freeze BYTES | off makes the script's
// registry serve every blob with the byte at OFFSET flipped, or stop each
// blob's body after BYTES and hang until the script ends (a registry
// frozen mid-pull), or as it is; it counts blob GETs afresh.
func cmdRegistryFault(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: registryfault tamper OFFSET | freeze BYTES | off")
	}
	reg := scriptRegistry(ts)
	if args[0] == "off" && len(args) == 1 {
		reg.SetFault(nil)
		return
	}
	if len(args) != 2 {
		ts.Fatalf("usage: registryfault tamper OFFSET | freeze BYTES | off")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	switch args[0] {
	case "tamper":
		reg.SetFault(&guardtest.BlobFault{Tamper: n, Freeze: -1})
	case "freeze":
		reg.SetFault(&guardtest.BlobFault{Tamper: -1, Freeze: n})
	default:
		ts.Fatalf("usage: registryfault tamper OFFSET | freeze BYTES | off")
	}
}

// registrygets N checks that the registry had exactly N GETs of a blob
// since the last registryfault.
func cmdRegistryGets(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: registrygets N")
	}
	want, err := strconv.ParseInt(args[0], 10, 64)
	ts.Check(err)
	got := scriptRegistry(ts).BlobGets()
	if (got == want) == neg {
		ts.Fatalf("%d blob GETs, want %s%d", got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}
