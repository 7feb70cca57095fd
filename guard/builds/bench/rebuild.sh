#!/bin/sh
# Times a cold rebuild of testdata/cmake-fixture through builds.Builder and
# with the bare cmake commands, interleaved in one run, and prints both and
# their ratio (goal: guard within 1.2x of bare).
#   guard/builds/bench/rebuild.sh [ROUNDS]   (default 5)
set -eu
cd "$(dirname "$0")/../../.."
rounds=${1:-5}
go test -run '^$' -bench '^BenchmarkRebuild$' -benchtime "${rounds}x" ./guard/builds/ |
	awk '/^BenchmarkRebuild/ {
		for (i = 1; i <= NF; i++) {
			if ($i == "bare-ms/op") bare = $(i-1)
			if ($i == "guard-ms/op") guard = $(i-1)
			if ($i == "ratio") ratio = $(i-1)
		}
		found = 1
	}
	{ print }
	END {
		if (!found) { print "rebuild.sh: no benchmark result" > "/dev/stderr"; exit 1 }
		printf "cold fixture rebuild: bare cmake %s ms, through guard %s ms, ratio %.2fx (goal <= 1.2x)\n", bare, guard, ratio
	}'
