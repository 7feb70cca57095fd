#!/usr/bin/env bash
# all.sh: every benchmark of guard, side by side in one run, as the
# Markdown that BENCHMARKS.md holds. Each section names the command that
# produced it. Needs go; hyperfine, curl and cmake make their sections
# (.ci/run installs cmake and curl; apt-get install -y hyperfine).
#
#   bench/all.sh > BENCHMARKS.md
set -uo pipefail
cd "$(dirname "$0")/.."

section() {
	printf '\n## %s\n\n`%s`\n\n```\n' "$1" "$2"
	bash -c "$2" 2>&1 | grep -vE '^(goos|goarch|pkg|cpu|PASS|ok )' | sed -e 's/[[:space:]]*$//'
	printf '```\n'
}

printf '# Benchmarks\n\nAll figures below come from one run of `bench/all.sh` on %s\n' "$(date -u +%Y-%m-%d)"
printf '(%s cores, %s, load average at the start: %s). The machines are shared:\n' "$(nproc)" "$(go version | awk '{print $3}')" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'ratios inside one run are the figures to trust, not absolute milliseconds.\n'

section "Shim start-up: guard against a direct exec and floor shims (goals: exec path <= 1.1x, supervised and cache hit <= 1.25x the zap floor)" \
	"BENCH_STAT=median bench/shim-overhead.sh"
section "Model fast path: 2 GB sparse file against 1 KB (goal: within 1.1x), and sha256 throughput" \
	"go test -run '^\$' -bench 'Quick|Sum' -benchtime 2000x ./guard/models/verify/"
section "Download: guard's resumable, verified fetch against curl over loopback (goal: >= 0.8x curl)" \
	"bench/download-vs-curl.sh 256 3"
section "Rebuild of the CMake fixture through guard against bare cmake (goal: within 1.2x)" \
	"guard/builds/bench/rebuild.sh 3"
section "Binary health check on a healthy call (stamped) and without its stamp" \
	"go test -run '^\$' -bench CheckBinary -benchtime 2000x ./guard/builds/"
section "Manifest: TOML decode against the decoded-manifest cache a shim call uses" \
	"go test -run '^\$' -bench 'ParseDefault|LoadDecoded' -benchtime 2000x ./manifest/"
section "Prompt cache: a hit, a miss, the key" \
	"go test -run '^\$' -bench . -benchtime 2000x ./guard/promptcache/"
section "Supervised run of /bin/true against plain os/exec" \
	"go test -run '^\$' -bench . -benchtime 300x ./guard/runner/"
