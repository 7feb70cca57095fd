#!/usr/bin/env bash
# install.sh: build guard and protect this sandbox (guard install).
# Idempotent: run it again after an eviction and it restores the shims.
# Network: only the Go module proxy (for guard's own dependencies).
# Arguments are passed to `guard install` (e.g. --no-rc, --shim-dir D).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
  echo "install.sh: Go is not installed or not in PATH; install Go 1.26 or newer (https://go.dev/doc/install) and run ./install.sh again" >&2
  exit 1
fi

out="${GUARD_BUILD_DIR:-$PWD/bin}"
mkdir -p "$out"
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
echo "install.sh: building guard $version (static, CGO_ENABLED=0)"
build() { CGO_ENABLED=0 go build -tags urfave_cli_no_docs -trimpath -ldflags "-s -w -X main.version=$version" "$@" -o "$out/guard" ./cmd/guard; }
# A checkout git will not read (owned by another user, no .git) must not stop
# the install: build again without the VCS stamp.
build 2>/dev/null || build -buildvcs=false

"$out/guard" install "$@"
