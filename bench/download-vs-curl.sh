#!/usr/bin/env bash
# download-vs-curl.sh: guard's model download (guard/models/fetch: hash while
# writing, fsync, rename) against `curl -o`, from the same loopback file
# server into the same folder, in one run. Prints both MB/s and the ratio;
# the goal is guard >= 0.8x curl. Installs nothing: needs go and curl.
#
#   bench/download-vs-curl.sh [SIZE_MB] [ROUNDS]
set -euo pipefail

size_mb=${1:-256}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)

command -v curl >/dev/null || { echo "download-vs-curl: curl is not installed; nothing to compare" >&2; exit 0; }
command -v go >/dev/null || { echo "download-vs-curl: go is not installed" >&2; exit 1; }

work=$(mktemp -d)
dest=$work
# A tmpfs leaves the disk out of both figures when one is there.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	dest=$(mktemp -d /dev/shm/guard-bench.XXXXXX)
fi
server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
	rm -rf "$work"
	[ "$dest" != "$work" ] && rm -rf "$dest"
}
trap cleanup EXIT

# The file: a GGUF header, then random bytes (nothing compresses).
head -c "$((size_mb << 20))" /dev/urandom >"$work/body"
{ printf 'GGUF\003\000\000\000'; tail -c +9 "$work/body"; } >"$work/m.gguf"
size=$(stat -c %s "$work/m.gguf")

# A plain stdlib file server (sendfile on its side), the same for both.
cat >"$work/serve.go" <<'GO'
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(ln.Addr())
	os.Stdout.Close()
	panic(http.Serve(ln, http.FileServer(http.Dir(os.Args[1]))))
}
GO
(cd "$work" && go build -o serve serve.go)
(cd "$root" && go test -c -o "$work/fetch.test" ./guard/models/fetch)
"$work/serve" "$work" >"$work/addr" &
server_pid=$!
for _ in $(seq 50); do [ -s "$work/addr" ] && break; sleep 0.1; done
url="http://$(cat "$work/addr")/m.gguf"

best_curl=0
best_guard=0
for round in $(seq "$rounds"); do
	bps=$(curl -s -o "$dest/curl.gguf" -w '%{speed_download}' "$url")
	rm -f "$dest/curl.gguf"
	c=$(awk -v b="$bps" 'BEGIN { printf "%.1f", b / 1e6 }')
	g=$(FETCH_BENCH_URL=$url FETCH_BENCH_SIZE=$size FETCH_BENCH_DIR=$dest \
		"$work/fetch.test" -test.run '^$' -test.bench '^BenchmarkFetchLoopback$' -test.benchtime 1x |
		awk '/MB\/s/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i }')
	echo "round $round: curl $c MB/s, guard $g MB/s"
	best_curl=$(awk -v a="$best_curl" -v b="$c" 'BEGIN { print (b > a) ? b : a }')
	best_guard=$(awk -v a="$best_guard" -v b="$g" 'BEGIN { print (b > a) ? b : a }')
done
ratio=$(awk -v g="$best_guard" -v c="$best_curl" 'BEGIN { printf "%.2f", g / c }')
echo "best of $rounds, $size_mb MB over loopback into $dest:"
echo "  curl -o   $best_curl MB/s"
echo "  guard     $best_guard MB/s (sha256 while writing, fsync, rename)"
echo "  ratio     ${ratio}x curl (goal >= 0.8x)"
