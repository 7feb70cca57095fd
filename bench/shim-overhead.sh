#!/usr/bin/env bash
# shim-overhead.sh: what a call through guard costs before the real tool
# starts, side by side with the cheapest ways to put a program in front of
# another one. Everything runs in a throw-away HOME under a temp dir.
#
#   bench/shim-overhead.sh            # from anywhere inside the repo
#   BENCH_RUNS=500 bench/shim-overhead.sh
#   BENCH_STAT=median bench/shim-overhead.sh  # ratios of medians (loaded box)
#   BENCH_STAT=cpu bench/shim-overhead.sh     # ratios of user+system time
#   BENCH_KEEP=1 bench/shim-overhead.sh   # keep the temp dir (json, csv)
#   BENCH_LOOP=1 bench/shim-overhead.sh   # the bash loop even with hyperfine
#   BENCH_GUARD=/tmp/guard-x bench/shim-overhead.sh  # time this guard binary
#
# Uses hyperfine (apt-get install -y hyperfine) and falls back to a plain
# bash loop timed with `date +%s%N` when it is missing.
#
# Goals (issue "Benchmark"): guard's exec path <= 1.1x the zap floor shim,
# the supervised path <= 1.25x.
set -euo pipefail

runs=${BENCH_RUNS:-120}    # per command, split over the rounds
rounds=${BENCH_ROUNDS:-4}
warmup=${BENCH_WARMUP:-5}  # per command and round
stat=${BENCH_STAT:-mean}   # mean, median or cpu: what the ratios compare
exec_goal=1.10
supervised_goal=1.25

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/guard-bench.XXXXXX")
cleanup() {
	if [[ -n ${BENCH_KEEP:-} ]]; then
		echo "kept $tmp" >&2
	else
		rm -rf -- "$tmp"
	fi
}
trap cleanup EXIT

out=$tmp/bin
mkdir -p "$out" "$tmp/realbin" "$tmp/home" "$tmp/state"

# Same flags as a release build (install.sh builds guard with them): a cgo
# link alone adds milliseconds a call.
build() {
	CGO_ENABLED=0 go build -C "$root" -tags urfave_cli_no_docs -trimpath -ldflags "-s -w" -o "$1" "$2"
}
echo "building in $root" >&2
build "$out/minimal" ./bench/floor/minimal
build "$out/zapfloor" ./bench/floor/zap
have_guard=1
if [[ -n ${BENCH_GUARD:-} ]]; then
	cp -- "$BENCH_GUARD" "$out/guard"
elif ! build "$out/guard" ./cmd/guard 2>"$tmp/guard-build.log"; then
	have_guard=
	echo "guard does not build; timing the floors only:" >&2
	sed 's/^/  /' "$tmp/guard-build.log" >&2
fi

# The real tools are all /bin/true, so every row runs the same program and
# the differences are the shims alone.
real=$tmp/realbin/true
for name in true npx slowtool plain; do
	cp /bin/true "$tmp/realbin/$name"
done

printf '#!/bin/bash\nexec %q "$@"\n' "$real" >"$out/bash-shim"
chmod +x "$out/bash-shim"

# A sandboxed guard: nothing here may reach the real HOME or log.
export HOME=$tmp/home
export GUARD_LOG=$tmp/selfheal.log
export GUARD_STATE_DIR=$tmp/state
export GUARD_SHIM_DIR=$tmp/home/.shim
export GUARD_MANIFEST=$tmp/manifest.toml
export PATH=$tmp/home/.shim:$tmp/realbin:/usr/bin:/bin
export SHIM_TARGET=$real
unset XDG_CONFIG_HOME XDG_CACHE_HOME

{
	cat "$root/manifest/default.toml"
	printf '\n[tools.slowtool]\ntimeout = "60s"\n\n[tools.plain]\n'
} >"$GUARD_MANIFEST"

if [[ -n $have_guard ]]; then
	if ! "$out/guard" install --no-rc >"$tmp/install.log" 2>&1; then
		echo "guard install failed:" >&2
		sed 's/^/  /' "$tmp/install.log" >&2
		have_guard=
	fi
fi
# Which path did guard take? A probe tool prints its parent pid: when guard
# execs the tool, the parent is this shell; when it supervises, it is guard.
declare -A mode=()
if [[ -n $have_guard ]]; then
	for tool in npx slowtool plain; do
		printf '#!/bin/sh\necho "$PPID" >%q\n' "$tmp/$tool.ppid" >"$tmp/realbin/$tool"
		chmod +x "$tmp/realbin/$tool"
		if ! "$GUARD_SHIM_DIR/$tool" </dev/null >"$tmp/$tool.out" 2>&1; then
			echo "guard's $tool path fails:" >&2
			sed 's/^/  /' "$tmp/$tool.out" >&2
			have_guard=
			break
		fi
		if [[ $(cat "$tmp/$tool.ppid" 2>/dev/null) == "$$" ]]; then
			mode[$tool]=exec
		else
			mode[$tool]=supervised
		fi
		cp /bin/true "$tmp/realbin/$tool"
	done
fi

# A prompt-cache hit: the llama shim answers a repeated call from the cache
# without starting the tool (the first call below stores the answer).
if [[ -n $have_guard ]]; then
	mkdir -p "$HOME/llama.cpp/build/bin"
	printf '#!/bin/sh\necho "a cached answer"\n' >"$HOME/llama.cpp/build/bin/llama-completion"
	chmod +x "$HOME/llama.cpp/build/bin/llama-completion"
	printf 'GGUF\003\000\000\000' >"$HOME/m.gguf"
	llama_call="$GUARD_SHIM_DIR/llama-completion -m $HOME/m.gguf -p hi -n 4"
	if ! $llama_call </dev/null >"$tmp/llama.out" 2>&1 || ! grep -q 'a cached answer' "$tmp/llama.out"; then
		echo "guard's llama path fails:" >&2
		sed 's/^/  /' "$tmp/llama.out" >&2
		llama_call=
	fi
fi

names=(direct bash-shim minimal-go zap-floor)
cmds=("$real" "$out/bash-shim" "$out/minimal" "$out/zapfloor")
if [[ -n $have_guard ]]; then
	names+=(guard-plain guard-npx guard-slowtool)
	cmds+=("$GUARD_SHIM_DIR/plain" "$GUARD_SHIM_DIR/npx" "$GUARD_SHIM_DIR/slowtool")
	echo "guard modes: plain=${mode[plain]} npx=${mode[npx]} slowtool=${mode[slowtool]}" >&2
fi
if [[ -n ${llama_call:-} ]]; then
	names+=(guard-cache-hit)
	cmds+=("$llama_call")
fi
modes="guard-plain=${mode[plain]:-} guard-npx=${mode[npx]:-} guard-slowtool=${mode[slowtool]:-} guard-cache-hit=cache"

# Rounds interleave the commands so a load change on a shared machine hits
# every row alike instead of whichever command was running at the time.
csv=$tmp/results.csv
echo "round,command,mean,median,cpu" >"$csv"
per_round=$(((runs + rounds - 1) / rounds))
if [[ -z ${BENCH_LOOP:-} ]] && command -v hyperfine >/dev/null; then
	for ((round = 1; round <= rounds; round++)); do
		args=(-N --warmup "$warmup" --runs "$per_round" --style none
			--export-json "$tmp/round-$round.json" --export-csv "$tmp/round-$round.csv")
		for i in "${!names[@]}"; do
			args+=(-n "${names[$i]}" "${cmds[$i]}")
		done
		# Its outlier warnings are expected on a shared box; show them only
		# when a command fails.
		if ! hyperfine "${args[@]}" </dev/null >/dev/null 2>"$tmp/hyperfine.log"; then
			cat "$tmp/hyperfine.log" >&2
			exit 1
		fi
		# hyperfine's csv: command,mean,stddev,median,user,system,... in seconds.
		awk -F, -v r="$round" 'NR > 1 { print r "," $1 "," $2 "," $4 "," $5 + $6 }' "$tmp/round-$round.csv" >>"$csv"
	done
else
	echo "timing a bash loop (no hyperfine: apt-get install -y hyperfine); each row also pays bash's fork" >&2
	for ((round = 1; round <= rounds; round++)); do
		for i in "${!names[@]}"; do
			cmd=${cmds[$i]}
			# Unquoted: a row may carry arguments (the cache-hit call).
			for ((r = 0; r < warmup; r++)); do $cmd </dev/null >/dev/null 2>&1; done
			start=$(date +%s%N)
			# bash's time keyword gives the children's user and system time.
			cpu=$( { TIMEFORMAT='%3U %3S'; time for ((r = 0; r < per_round; r++)); do
				$cmd </dev/null >/dev/null 2>&1; done; } 2>&1)
			end=$(date +%s%N)
			# A loop gives no median: the mean stands in for it.
			awk -v n="${names[$i]}" -v ns=$((end - start)) -v runs="$per_round" -v r="$round" -v cpu="$cpu" \
				'BEGIN { split(cpu, c, " "); m = ns / runs / 1e9
					printf "%s,%s,%.9f,%.9f,%.9f\n", r, n, m, m, (c[1] + c[2]) / runs }' >>"$csv"
		done
	done
fi

# Page faults do not change with the load of a shared machine, unlike the
# times above, and track binary size and init work: one more column when
# perf is there (apt-get install -y linux-perf).
faults=$tmp/faults.csv
: >"$faults"
if command -v perf >/dev/null && perf stat -e page-faults true 2>/dev/null; then
	for i in "${!names[@]}"; do
		n=$(perf stat -x, -e page-faults -r 20 ${cmds[$i]} 2>&1 >/dev/null </dev/null | awk -F, '$3 == "page-faults" { print $1 }')
		echo "${names[$i]},$n" >>"$faults"
	done
fi

# name, mean ms, median ms, cpu ms, x direct, x floor, goal. The mean and
# the cpu time (user + system) are over all runs (every round has as many);
# the median is the median of the rounds'.
awk -F, -v eg="$exec_goal" -v sg="$supervised_goal" -v modes="$modes" -v stat="$stat" '
BEGIN {
	m = split(modes, kv, " ")
	for (i = 1; i <= m; i++) { split(kv[i], p, "="); mode[p[1]] = p[2] }
}
FILENAME == ARGV[1] { pf[$1] = $2; next }
FNR == 1 { next }
{
	if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 }
	sum[$2] += $3 * 1000; cpu[$2] += $5 * 1000; cnt[$2]++
	med[$2, cnt[$2]] = $4 * 1000
}
function median(name,    k, j, t, a, c) {
	c = cnt[name]
	for (k = 1; k <= c; k++) a[k] = med[name, k]
	for (k = 2; k <= c; k++)
		for (j = k; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
}
END {
	for (i = 1; i <= n; i++) {
		name = order[i]; mean[name] = sum[name] / cnt[name]; mid[name] = median(name)
		cpums[name] = cpu[name] / cnt[name]
		v[name] = stat == "median" ? mid[name] : stat == "cpu" ? cpums[name] : mean[name]
	}
	d = v["direct"]; f = v["zap-floor"]
	printf "%-16s %8s %9s %7s %6s %8s %8s  %s\n", "name", "mean ms", "median ms", "cpu ms", "faults", "x direct", "x floor", "goal (ratios of the " stat ")"
	for (i = 1; i <= n; i++) {
		name = order[i]; r = v[name] / f; goal = ""
		# The goal follows the path guard really took, found by the probe.
		if (mode[name] == "exec")
			goal = sprintf("%s exec <= %.2fx", r <= eg ? "PASS" : "MISS", eg)
		else if (mode[name] == "supervised")
			goal = sprintf("%s supervised <= %.2fx", r <= sg ? "PASS" : "MISS", sg)
		else if (mode[name] == "cache")
			goal = sprintf("%s cache hit <= %.2fx", r <= sg ? "PASS" : "MISS", sg)
		printf "%-16s %8.3f %9.3f %7.3f %6s %8.2f %8.2f  %s\n", name, mean[name], mid[name], cpums[name], pf[name] == "" ? "-" : pf[name], v[name] / d, r, goal
	}
}' "$faults" "$csv"
if [[ -z $have_guard ]]; then
	echo "guard rows skipped: see the messages above"
fi
# A hot path that heals or warns on every call is not the path we meant to
# time: say so.
if [[ -s $GUARD_LOG ]]; then
	echo "guard logged $(wc -l <"$GUARD_LOG") heal events during the run (BENCH_KEEP=1 keeps $GUARD_LOG)"
fi
