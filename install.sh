#!/usr/bin/env bash
# install.sh: build guard and protect this sandbox (guard install).
# Idempotent: run it again after an eviction and it restores the shims; the
# PATH block runs it by itself when guard's copy is gone (docs/surviving-eviction.md,
# "Surviving the eviction of guard itself").
# Network: only the Go module proxy (for guard's own dependencies).
# Arguments are passed to `guard install` (e.g. --no-rc, --shim-dir D,
# --bash-env, --prewarm, --system).
set -euo pipefail
cd "$(dirname "$0")"

# The Go release go.mod asks for: the README and the messages name it from
# here, so they cannot drift apart.
need=$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' go.mod)
if ! command -v go >/dev/null 2>&1; then
  echo "install.sh: Go is not installed or not in PATH; install Go $need or newer (https://go.dev/doc/install) and run ./install.sh again" >&2
  exit 1
fi

out="${GUARD_BUILD_DIR:-$PWD/bin}"
mkdir -p "$out"
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
echo "install.sh: building guard $version (static, CGO_ENABLED=0) into $out; a first build on a fresh machine fetches and compiles its dependencies, a minute or two"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# build runs go build in the background and prints a line every 10 s while
# it runs, so a long first build never looks hung; the compiler's own output
# is kept for when it fails.
build() {
  CGO_ENABLED=0 go build -tags urfave_cli_no_docs -trimpath -ldflags "-s -w -X main.version=$version" "$@" -o "$out/guard" ./cmd/guard >"$log" 2>&1 &
  local pid=$! n=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    if [ $((n % 10)) -eq 0 ]; then echo "install.sh: still building guard (${n}s)" >&2; fi
  done
  wait "$pid"
}
failed() {
  cat "$log" >&2
  echo "install.sh: go build failed (its output is above); fix that and run ./install.sh again" >&2
  exit 1
}
start=$SECONDS
if ! build; then
  # A checkout git will not read (owned by another user, no .git) must not
  # stop the install: build again without the VCS stamp. Any other error is
  # the compiler's, shown as it is.
  grep -q 'VCS status' "$log" || failed
  echo "install.sh: git cannot read this checkout; building without the VCS stamp" >&2
  build -buildvcs=false || failed
fi
echo "install.sh: built $out/guard in $((SECONDS - start))s"

"$out/guard" install --source "$PWD" "$@"
