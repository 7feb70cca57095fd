package manifest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandbox-guard/guard/manifest"
)

// manifestErrors flattens what Parse returned into its *Errors, failing the
// test on anything else.
func manifestErrors(t *testing.T, err error) []*manifest.Error {
	t.Helper()
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var all []*manifest.Error
		for _, e := range joined.Unwrap() {
			all = append(all, manifestErrors(t, e)...)
		}
		return all
	}
	var me *manifest.Error
	if !errors.As(err, &me) || error(me) != err {
		t.Fatalf("error is %T, want *manifest.Error: %v", err, err)
	}
	return []*manifest.Error{me}
}

const oneModel = "[[models]]\nfile = \"a.gguf\"\nsize = 1\n"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		toml string
		line int
		msg  string
	}{
		// TOML itself
		{"syntax", "log = \"/x\"\na = \n", 2, "unexpected character U+000A at start of value"},
		{"syntax at the end of a line", "log = \"/x\"\n[[models]\n", 2, "expected ']]' to close array table name"},
		{"duplicate key", "log = \"/x\"\n\nlog = \"/y\"\n", 3, "key log is already defined"},
		// a value of the wrong type: the same file:line, index and fix as
		// every other error
		{"type mismatch", oneModel + "[[models]]\nfile = \"b.gguf\"\nsize = \"big\"\n", 6,
			`models[1].size: "big" is text, but size must be a whole number`},
		{"size in quotes", "[[models]]\nfile = \"a.gguf\"\nsize = \"4096\"\n", 3,
			`models[0].size: "4096" is text, but size must be a whole number: write it without quotes, size = 4096`},
		{"one [models] table", "[models]\nfile = \"a.gguf\"\nsize = 4096\n", 1,
			"models: [models] is one table, but models is a list of tables: write [[models]] (two brackets) before each one"},
		{"urls as one string", oneModel + "urls = \"https://h.example/a\"\n", 4,
			`models[0].urls: "https://h.example/a" is text, but urls must be a list: write it in brackets, urls = ["https://h.example/a"]`},
		{"a step that is not a list", "[builds.b]\ndir = \"/b\"\nsteps = [\"make\", \"-j2\"]\n", 3,
			`builds.b.steps[0]: "make" is text, but each item of steps must be a list: write it in brackets, ["make"]`},
		{"size as a list", "[[models]]\nfile = \"a.gguf\"\nsize = [1]\n", 3,
			"models[0].size: [1] is a list, but size must be a whole number"},
		{"size as a list in an inline model", "models = [{ file = \"a.gguf\", size = [1] }]\n", 1,
			"models[0].size: [1] is a list, but size must be a whole number"},
		{"path as a list", "[tools.a]\npath = [\"/x\"]\n", 2, `tools.a.path: ["/x"] is a list, but path must be text`},
		{"a step's argument as a number", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\", 5]]\n", 3,
			`builds.b.steps[0][1]: 5 is a number, but each item of steps[0] must be text: write it in quotes, "5"`},
		{"a step that is not a list, on its own line", "[builds.b]\ndir = \"/b\"\nsteps = [\n  \"make\",\n]\n", 4,
			`builds.b.steps[0]: "make" is text, but each item of steps must be a list: write it in brackets, ["make"]`},
		{"path as a number", "[tools.a]\npath = 5\n", 2, `tools.a.path: 5 is a number, but path must be text: write it in quotes, path = "5"`},
		{"cache in quotes", "[tools.a]\ncache = \"false\"\n", 2,
			`tools.a.cache: "false" is text, but cache must be true or false: write it without quotes, cache = false`},
		{"fraction for a count", "[swarm]\nlight_words = 1.5\n", 2, "swarm.light_words: 1.5 is a fraction, but light_words must be a whole number"},
		{"tokens per second in quotes", oneModel + "budget = { tokens_per_second = \"5\" }\n", 4,
			`models[0].budget.tokens_per_second: "5" is text, but tokens_per_second must be a number: write it without quotes, tokens_per_second = 5`},
		{"a tool that is not a table", "[tools]\na = 1\n", 2, "tools.a: 1 is a number, but tools.a must be a table: write [tools.a] and its keys below it"},
		{"tools that are not tables", "tools = 3\n", 1, "tools: 3 is a number, but tools must be a table: write [tools.NAME] for each entry"},

		// unknown keys
		{"unknown top key", "logg = \"/x\"\n", 1, "unknown key logg (did you mean log?)"},
		{"unknown key in second model", oneModel + "[[models]]\nfile = \"b.gguf\"\nsize = 2\nsise = 2\n", 7,
			"unknown key models.sise (did you mean size?)"},
		{"unknown table once", "[frob]\na = 1\nb = 2\n", 1, "unknown key frob"},
		{"unknown key in inline table", oneModel + "budget = { base = \"1s\",\n  tps = 2 }\n", 5,
			"unknown key models.budget.tps"},
		{"unknown dotted key", "[tools.a]\nx.y = 1\n", 2, "unknown key tools.a.x.y"},
		{"unknown key in sub-table of second model", oneModel + "[[models]]\nfile = \"b.gguf\"\nsize = 2\n[models.budget]\nbase = \"1s\"\nbas = \"2s\"\n", 9,
			"unknown key models.budget.bas (did you mean base?)"},

		// durations
		{"duration without unit", "[tools.a]\nstall = \"45\"\n", 2,
			`tools.a.stall: "45" is not a duration: write a number with a unit, such as "45s" or "2m"`},
		{"duration as integer", "[tools.a]\ntimeout = 45\n", 2,
			`tools.a.timeout: 45 is not a duration: write a number with a unit, such as "45s" or "2m"`},
		{"negative duration", "[budget]\ncap = \"-1s\"\n", 2, "budget.cap: -1s: a duration must not be negative"},
		{"bad duration in inline table", oneModel + "role = \"fast\"\n[swarm]\nroles = { SCOUT = \"fast\", SAGE = \"fast\" }\ntimeouts = { SCOUT = \"1m\",\nSAGE = \"soon\" }\n", 8,
			`swarm.timeouts.SAGE: "soon" is not a duration: write a number with a unit, such as "45s" or "2m"`},
		{"bad model budget", oneModel + "budget = { base = \"3x\" }\n", 4,
			`models[0].budget.base: "3x" is not a duration: write a number with a unit, such as "45s" or "2m"`},
		{"prebuilt github not OWNER/REPO", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\n[builds.b.prebuilt]\ngithub = \"llama.cpp\"\nasset = \"a-{tag}.tgz\"\n", 5,
			`builds.b.prebuilt.github: "llama.cpp" is not OWNER/REPO, such as "ggml-org/llama.cpp"`},
		{"prebuilt asset without {tag}", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\n[builds.b.prebuilt]\ngithub = \"o/r\"\nasset = \"a.tgz\"\n", 6,
			`builds.b.prebuilt.asset: "a.tgz" must be an asset's file name with {tag} in it, such as "llama-{tag}-bin-ubuntu-{arch}.tar.gz"`},
		{"prebuilt short sha256", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\n[builds.b.prebuilt]\ngithub = \"o/r\"\nasset = \"a-{tag}.tgz\"\nsha256 = \"ab\"\n", 7,
			"builds.b.prebuilt.sha256: must be 64 hex characters: the sha256 of the asset"},
		{"bad build timeout", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\ntimeout = \"1d\"\n", 4,
			`builds.b.timeout: "1d" is not a duration: write a number with a unit, such as "45s" or "2m"`},
		{"bad ttl", "[cache]\nttl = \"-5m\"\n", 2, "cache.ttl: -5m: a duration must not be negative"},
		{"lease too short", "[stash]\nlease = \"500ms\"\n", 2, "stash.lease: 500ms: a lease is between 1s and 10m"},
		{"lease too long", "[stash]\nlease = \"1h\"\n", 2, "stash.lease: 1h: a lease is between 1s and 10m"},
		{"negative lease", "[stash]\nlease = \"-5s\"\n", 2, "stash.lease: -5s: a duration must not be negative"},

		// models
		{"zero size", "[[models]]\nfile = \"a.gguf\"\nsize = 0\n", 3,
			"models[0].size: must be the file's exact size in bytes, greater than zero"},
		{"negative size", oneModel + "[[models]]\nfile = \"b.gguf\"\nsize = -5\n", 6,
			"models[1].size: must be the file's exact size in bytes, greater than zero"},
		{"missing size points at the block", oneModel + "\n[[models]]\nfile = \"b.gguf\"\n", 5,
			"models[1].size: must be the file's exact size in bytes, greater than zero"},
		{"empty file", "[[models]]\nfile = \"\"\nsize = 1\n", 2, "models[0].file: missing: the model's local file name"},
		{"file with slash", "[[models]]\nfile = \"m/a.gguf\"\nsize = 1\n", 2,
			`models[0].file: "m/a.gguf" must be a plain file name, not a path`},
		{"file dot dot", "[[models]]\nfile = \"..\"\nsize = 1\n", 2, `models[0].file: ".." must be a plain file name, not a path`},
		{"duplicate file", oneModel + "[[models]]\nfile = \"a.gguf\"\nsize = 1\n", 5, `models[1].file: "a.gguf" is already models[0]`},
		{"duplicate role", oneModel + "role = \"r\"\n[[models]]\nfile = \"b.gguf\"\nsize = 1\nrole = \"r\"\n", 8,
			`models[1].role: role "r" is already models[0]'s`},
		{"short sha256", oneModel + "sha256 = \"abc\"\n", 4,
			"models[0].sha256: must be 64 hex characters, or empty until `guard manifest pin` fills it"},
		{"non-hex sha256", oneModel + "sha256 = \"" + strings.Repeat("g", 64) + "\"\n", 4,
			"models[0].sha256: must be 64 hex characters, or empty until `guard manifest pin` fills it"},
		{"push_to without a tag", oneModel + "push_to = \"oci://r.lan/fleet/m\"\n", 4,
			`models[0].push_to: "oci://r.lan/fleet/m": push to a tag, oci://HOST[:PORT]/REPO:TAG (the digest is the file's)`},
		{"push_to a digest", oneModel + "push_to = \"oci://r.lan/fleet/m@sha256:" + strings.Repeat("a", 64) + "\"\n", 4,
			`models[0].push_to: "oci://r.lan/fleet/m@sha256:` + strings.Repeat("a", 64) + `": push to a tag, oci://HOST[:PORT]/REPO:TAG (the digest is the file's)`},
		{"push_to not first of urls", oneModel + "sha256 = \"" + strings.Repeat("a", 64) + "\"\nurls = [\"https://h.example/m\", \"oci://r.lan/fleet/m:q\"]\npush_to = \"oci://r.lan/fleet/m:q\"\n", 6,
			`models[0].push_to: "oci://r.lan/fleet/m:q" must also be the first of urls, where the rest of the fleet takes the model from`},
		{"push_to unpinned", oneModel + "urls = [\"oci://r.lan/fleet/m:q\"]\npush_to = \"oci://r.lan/fleet/m:q\"\n", 5,
			`models[0].push_to: needs the model's sha256 (guard manifest pin fills it)`},
		{"push_to not a registry", oneModel + "push_to = \"https://r.lan/m\"\n", 4,
			`models[0].push_to: "https://r.lan/m" is not a registry: want oci://HOST[:PORT]/REPO:TAG`},
		{"too many connections", oneModel + "connections = 17\n", 4,
			"models[0].connections: must be from 1 to 16 (or 0 for the default, 8)"},
		{"negative connections", oneModel + "connections = -1\n", 4,
			"models[0].connections: must be from 1 to 16 (or 0 for the default, 8)"},
		{"negative tokens per second", oneModel + "budget = { tokens_per_second = -1.0 }\n", 4,
			"models[0].budget.tokens_per_second: must be a positive number, or 0 for no per-token time"},
		{"nan tokens per second", oneModel + "budget = { tokens_per_second = nan }\n", 4,
			"models[0].budget.tokens_per_second: must be a positive number, or 0 for no per-token time"},
		{"model fallback to nothing", oneModel + "fallback = \"q9\"\n", 4, `models[0].fallback: no model with role or file "q9"`},
		{"model fallback to itself", oneModel + "role = \"r\"\nfallback = \"r\"\n", 5, "models[0].fallback: a model cannot fall back to itself"},

		// URLs
		{"http to a remote host", oneModel + "urls = [\n  \"https://h.example/a\",\n  \"http://h.example/a\",\n]\n", 6,
			`models[0].urls[1]: "http://h.example/a" uses plain http, which is allowed only for loopback hosts (127.0.0.0/8, localhost, [::1]): use https`},
		{"http to a private address", oneModel + "urls = [\"http://10.0.0.1/a\"]\n", 4,
			`models[0].urls[0]: "http://10.0.0.1/a" uses plain http, which is allowed only for loopback hosts (127.0.0.0/8, localhost, [::1]): use https`},
		{"ftp", oneModel + "urls = [\"ftp://h.example/a\"]\n", 4,
			`models[0].urls[0]: "ftp://h.example/a" uses ftp: only https (http for loopback, and file) is allowed`},
		{"no scheme", oneModel + "urls = [\"h.example/a.gguf\"]\n", 4,
			`models[0].urls[0]: "h.example/a.gguf" has no scheme: use an https:// URL`},
		{"https without host", oneModel + "urls = [\"https:///a\"]\n", 4, `models[0].urls[0]: "https:///a" has no host`},
		{"file on another host", oneModel + "urls = [\"file://nas/a.gguf\"]\n", 4,
			`models[0].urls[0]: "file://nas/a.gguf" names a remote host: a file URL must be local, such as file:///srv/models/x.gguf`},
		{"relative file url", oneModel + "urls = [\"file:a.gguf\"]\n", 4,
			`models[0].urls[0]: "file:a.gguf" must be an absolute file URL, such as file:///srv/models/x.gguf`},
		{"empty url", oneModel + "urls = [\"\"]\n", 4, "models[0].urls[0]: empty URL"},
		{"unparsable url", oneModel + "urls = [\"https://h.example/%zz\"]\n", 4,
			`models[0].urls[0]: "https://h.example/%zz" is not a URL: invalid URL escape "%zz"`},
		{"build repo over http", "[builds.b]\ndir = \"/b\"\nrepo = \"http://github.com/x/y\"\nsteps = [[\"make\"]]\n", 3,
			`builds.b.repo: "http://github.com/x/y" uses plain http, which is allowed only for loopback hosts (127.0.0.0/8, localhost, [::1]): use https`},

		// [self]
		{"self urls without sha256", "[self]\nurls = [\"file:///srv/guard\"]\n", 2,
			"self.urls: needs sha256: the sha256 of the guard executable the URLs serve (sha256sum bin/guard), or of the release archive when they end .tar.gz"},
		{"self short sha256", "[self]\nurls = [\"file:///srv/guard\"]\nsha256 = \"abc\"\n", 3,
			"self.sha256: must be 64 hex characters: the sha256 of the guard executable the URLs serve, or of the release archive when they end .tar.gz"},
		{"self url over http", "[self]\nurls = [\"http://h.example/guard\"]\nsha256 = \"" + strings.Repeat("a", 64) + "\"\n", 2,
			`self.urls[0]: "http://h.example/guard" uses plain http, which is allowed only for loopback hosts (127.0.0.0/8, localhost, [::1]): use https`},
		{"self unknown key", "[self]\nurl = \"file:///srv/guard\"\n", 2, "unknown key self.url (did you mean urls?)"},

		// tools
		{"tool build names no build", "[tools.a]\nbuild = \"nope\"\n", 2, "tools.a.build: no [builds.nope] in the manifest"},
		{"tool fallback names no tool", "[tools.a]\nfallback = [\"b\"]\n", 2, `tools.a.fallback[0]: no tool "b" in the manifest`},
		{"tool fallback to itself", "[tools.a]\n[tools.b]\nfallback = [\"a\", \"b\"]\n", 3, "tools.b.fallback[1]: a tool cannot fall back to itself"},
		{"llama fallback to another tool", "[tools.jq]\n[tools.llama-simple]\n[tools.llama-completion]\nfallback = [\"llama-simple\", \"jq\"]\n", 4,
			`tools.llama-completion.fallback[1]: a llama tool's fallbacks are its plan's: llama-simple after a failure (llama-completion only) and the model's fallback after a timeout`},
		{"prompts policy", "[tools.a]\nprompts = \"ask\"\n", 2,
			`tools.a.prompts: "ask" is not a prompt policy: use "answer", "yes", "kill" or leave it empty`},
		{"prompts policy in capitals", "[tools.a]\n\nprompts = \"YES\"\n", 3,
			`tools.a.prompts: "YES" is not a prompt policy: use "answer", "yes", "kill" or leave it empty`},
		{"tool name with slash", "[tools.\"bin/a\"]\nprompts = \"kill\"\n", 1,
			`tools."bin/a": a tool name must be a plain file name: it names the link in the shim dir`},
		{"tool named guard", "[tools.guard]\n", 1, "tools.guard: guard cannot shim itself: called as guard it runs its own commands, never a tool; name the tool otherwise"},
		{"relative tool path", "[tools.a]\npath = \"bin/a\"\n", 2, `tools.a.path: "bin/a" must be an absolute path or start with ~/`},
		{"tool package option", "[tools.a]\npackage = \"-oAPT::x\"\n", 2,
			`tools.a.package: "-oAPT::x" is not a Debian package name (lower case letters, digits, +, - and .)`},
		{"tool env name", "[tools.a]\nenv = { \"A=B\" = \"1\" }\n", 2, `tools.a.env."A=B": "A=B" is not an environment variable name`},

		// builds
		{"build without steps", "[builds.b]\ndir = \"/b\"\n", 1, "builds.b.steps: missing: a build needs at least one step"},
		{"build with an empty step", "[builds.b]\ndir = \"/b\"\nsteps = [\n  [\"cmake\", \"-B\", \"build\"],\n  [],\n]\n", 5, "builds.b.steps[1]: empty step"},
		{"build step with empty program", "[builds.b]\ndir = \"/b\"\nsteps = [[\"\", \"x\"]]\n", 3, "builds.b.steps[0]: empty program name"},
		{"build without dir", "[builds.b]\nsteps = [[\"make\"]]\n", 1, `builds.b.dir: missing: say where the build runs, such as "~/llama.cpp"`},
		{"{targets} inside an argument", "[builds.b]\ndir = \"/b\"\nsteps = [\n  [\"cmake\", \"-B\", \"build\"],\n  [\"make\", \"all-{targets}\"],\n]\n[tools.t]\npath = \"/b/t\"\nbuild = \"b\"\n", 5,
			"builds.b.steps[1][1]: {targets} must be a whole argument: it becomes one argument per target"},
		{"{targets} with no tool", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\", \"{targets}\"]]\n", 3,
			`builds.b.steps[0][1]: {targets} names no target: list them in targets, or give a tool with build = "b" a path`},
		{"{targets} with targets = []", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\", \"{targets}\"]]\ntargets = []\n[tools.t]\npath = \"/b/t\"\nbuild = \"b\"\n", 3,
			`builds.b.steps[0][1]: {targets} names no target: list them in targets, or give a tool with build = "b" a path`},
		{"unknown placeholder", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\", \"-j{job}\"]]\n", 3,
			"builds.b.steps[0][1]: unknown placeholder {job}: a step knows {targets} and {jobs}"},
		{"mistyped {targets}", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\", \"{target}\"]]\n", 3,
			"builds.b.steps[0][1]: unknown placeholder {target}: a step knows {targets} and {jobs}"},
		{"a target that is a flag", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\ntargets = [\"a\", \"-k\"]\n", 4,
			`builds.b.targets[1]: "-k" is not a target name`},
		{"build needs empty", "[builds.b]\ndir = \"/b\"\nneeds = [\"\"]\nsteps = [[\"make\"]]\n", 3, "builds.b.needs[0]: empty command name"},
		{"build output outside dir", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\noutputs = [\"build\", \"../lib\"]\n", 4,
			`builds.b.outputs[1]: "../lib" must be a folder below dir, such as "build": a scrub after an interrupted build removes files only there`},
		{"build output absolute", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\noutputs = [\"/b/build\"]\n", 4,
			`builds.b.outputs[0]: "/b/build" must be a folder below dir, such as "build": a scrub after an interrupted build removes files only there`},
		{"build output is dir itself", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\noutputs = [\"./\"]\n", 4,
			`builds.b.outputs[0]: "./" must be a folder below dir, such as "build": a scrub after an interrupted build removes files only there`},

		// everything else
		{"package name", "[packages]\n\"g++\" = \"G++\"\n", 2,
			`packages."g++": "G++" is not a Debian package name (lower case letters, digits, +, - and .)`},
		{"relative shim dir", "shim_dir = \"shims\"\n", 1, `shim_dir: "shims" must be an absolute path or start with ~/`},
		{"tilde user", "models_dir = \"~bob/m\"\n", 1, `models_dir: "~bob/m" must be an absolute path or start with ~/`},
		{"swarm role names no model", oneModel + "role = \"fast\"\n[swarm]\nroles = { SCOUT = \"fast\", SAGE = \"r1\" }\n", 6,
			`swarm.roles.SAGE: no model with role "r1"`},
		{"swarm timeout for no role", "[swarm]\ntimeouts = { SCOUT = \"1m\" }\n", 2, "swarm.timeouts.SCOUT: no swarm role SCOUT in swarm.roles"},
		{"negative light words", "[swarm]\nlight_words = -1\n", 2, "swarm.light_words: must not be negative"},
		{"negative light tokens", "[swarm]\nlight_tokens = -1\n", 2, "swarm.light_tokens: must be a positive number of tokens"},
		{"negative full tokens", "[swarm]\nlight_words = 8\nfull_tokens = -5\n", 3, "swarm.full_tokens: must be a positive number of tokens"},
		{"negative cache size", "[cache]\nmax_bytes = -1\n", 2, "cache.max_bytes: must not be negative"},
		{"negative stash size", "[stash]\nmax_bytes = -1\n", 2, "stash.max_bytes: must not be negative"},
		{"stash source over plain http", "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\nstash_from = [\"file:///srv/stash\", \"http://fleet.example/stash\"]\n", 4,
			`builds.b.stash_from[1]: "http://fleet.example/stash" uses plain http, which is allowed only for loopback hosts (127.0.0.0/8, localhost, [::1]): use https`},
		{"auth file relative", "[auth.x]\nfiles = [\"~/a\", \"b\"]\n", 2, `auth.x.files[1]: "b" must be an absolute path or start with ~/`},
		{"auth env", "[auth.x]\nenv = \"1X\"\n", 2, `auth.x.env: "1X" is not an environment variable name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Parse("m.toml", []byte(tt.toml), "/home/u")
			errs := manifestErrors(t, err)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), err)
			}
			got := errs[0]
			if got.File != "m.toml" || got.Line != tt.line || got.Msg != tt.msg {
				t.Errorf("got  %s:%d: %s\nwant m.toml:%d: %s", got.File, got.Line, got.Msg, tt.line, tt.msg)
			}
		})
	}
}

func TestParseCollectsAllErrorsInLineOrder(t *testing.T) {
	doc := `[tools.b]
build = "nope"

[[models]]
file = "a.gguf"
size = 0

[budget]
cap = "forever"
bogus = 1
`
	_, err := manifest.Parse("m.toml", []byte(doc), "/home/u")
	errs := manifestErrors(t, err)
	var got []int
	for _, e := range errs {
		got = append(got, e.Line)
	}
	want := []int{2, 6, 9, 10}
	if len(got) != len(want) {
		t.Fatalf("lines %v, want %v: %v", got, want, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lines %v, want %v: %v", got, want, err)
		}
	}
	if !strings.HasPrefix(err.Error(), "m.toml:2: tools.b.build: ") {
		t.Errorf("joined message starts %q", err.Error())
	}
}

func TestParseAccepts(t *testing.T) {
	tests := map[string]string{
		"empty":             "",
		"loopback http":     oneModel + "urls = [\"http://127.0.0.1:8080/a\", \"http://127.9.9.9/a\", \"http://localhost/a\", \"http://LOCALHOST:1/a\", \"http://[::1]:80/a\"]\n",
		"file urls":         oneModel + "urls = [\"file:///srv/a.gguf\", \"file://localhost/srv/a.gguf\"]\n",
		"empty duration":    "[tools.a]\nstall = \"\"\n",
		"zero duration":     "[tools.a]\ntimeout = \"0\"\n",
		"upper sha256":      oneModel + "sha256 = \"" + strings.Repeat("AB", 32) + "\"\n",
		"fallback by file":  oneModel + "[[models]]\nfile = \"b.gguf\"\nsize = 1\nfallback = \"a.gguf\"\n",
		"inline models":     "models = [{ file = \"a.gguf\", size = 1 }, { file = \"b.gguf\", size = 2, fallback = \"a.gguf\" }]\n",
		"tool cache switch": "[tools.a]\ncache = false\n",
		"prompts yes":       "[tools.a]\nprompts = \"yes\"\n",
		"quoted tool":       "[tools.\"llama.cpp-x\"]\nfallback = [\"y\"]\n[tools.y]\n",
		"crlf":              "[tools.a]\r\nstall = \"1s\"\r\n",
		"self mirror":       "[self]\nurls = [\"file:///srv/fleet/guard\"]\nsha256 = \"" + strings.Repeat("ab", 32) + "\"\n",
		"self sha256 alone": "[self]\nsha256 = \"" + strings.Repeat("ab", 32) + "\"\n",
		"stash sources":     "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\nstash_from = [\"file:///srv/stash\", \"https://fleet.example/stash\", \"http://127.0.0.1:8080/s\"]\n[stash]\nmax_bytes = 1000\n",
		"build outputs":     "[builds.b]\ndir = \"/b\"\nsteps = [[\"make\"]]\noutputs = [\"out\", \"sub/build/\"]\n",
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := manifest.Parse("m.toml", []byte(doc), "/home/u"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	if got := (&manifest.Error{File: "f.toml", Line: 3, Msg: "bad"}).Error(); got != "f.toml:3: bad" {
		t.Errorf("with line: %q", got)
	}
	if got := (&manifest.Error{File: "f.toml", Msg: "bad"}).Error(); got != "f.toml: bad" {
		t.Errorf("without line: %q", got)
	}
}
