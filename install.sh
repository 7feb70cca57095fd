#!/usr/bin/env bash
# install.sh: install guard and protect this sandbox (guard install), one of
# two ways (docs/install.md):
#  - from a checkout of guard with Go: build a static guard from source;
#  - with no Go, with --release, or run on its own (curl -fsSL URL | sh, or
#    downloaded from a release): install the release archive for this
#    machine, its sha256 checked against the release's checksums.txt before
#    anything is unpacked or run.
# Idempotent: run it again after an eviction and it restores the shims; the
# PATH block brings guard back by itself when guard's copy is gone
# (docs/surviving-eviction.md, "Surviving the eviction of guard itself"): a
# rebuild of the checkout, or the release archive again, verified.
# Network: the Go module proxy (a build), or the release's files (curl or
# wget; none for file:// or --archive).
# Its own options: --release, --from URL (GUARD_RELEASE_URL), --version V
# (GUARD_VERSION), --archive FILE [--checksums FILE]. The other arguments are
# passed to `guard install` (e.g. --no-rc, --shim-dir D, --bash-env,
# --prewarm, --system).
# POSIX sh, so that `curl ... | sh` runs it as it is.
set -eu
# shellcheck disable=SC3040 # pipefail where the shell has it
(set -o pipefail) 2>/dev/null && set -o pipefail

# The project's releases, and the end of each archive's name: cmd/release
# (ArchiveName) and .goreleaser.yaml name them guard_VERSION_linux_ARCH.tar.gz.
releases=https://github.com/sandbox-guard/guard/releases
mode= from=${GUARD_RELEASE_URL:-} rel_version=${GUARD_VERSION:-} archive= sums=
n=$#
while [ "$n" -gt 0 ]; do
  a=$1
  shift
  n=$((n - 1))
  case $a in
  --release) mode=release ;;
  --from | --version | --archive | --checksums)
    [ "$n" -gt 0 ] || { echo "install.sh: $a needs a value" >&2; exit 2; }
    case $a in --from) from=$1 ;; --version) rel_version=$1 ;; --archive) archive=$1 ;; --checksums) sums=$1 ;; esac
    shift
    n=$((n - 1))
    mode=release
    ;;
  --from=* | --version=* | --archive=* | --checksums=*)
    case $a in --from=*) from=${a#*=} ;; --version=*) rel_version=${a#*=} ;; --archive=*) archive=${a#*=} ;; --checksums=*) sums=${a#*=} ;; esac
    mode=release
    ;;
  *) set -- "$@" "$a" ;; # for guard install, in order
  esac
done
[ -z "$from$rel_version" ] || mode=release

fail() {
  echo "install.sh: $*; nothing was installed" >&2
  exit 1
}

# fetch URL FILE: file:// is a copy; else curl, or wget. Either gives up on a
# server that stalls: under 1 KiB/s for 30 s (curl), 30 s without a byte
# (wget), each with two tries more. What the tool says (a line per retry,
# then its error) goes to FILE.err, and its last line, the cause, into
# $why for install.sh's own one line: a failed download is one line.
fetch() {
  why=
  case $1 in
  file://*) p=${1#file://} && p=${p#localhost} && cp "$p" "$2" ;;
  *) if command -v curl >/dev/null 2>&1; then curl -fsSL --connect-timeout 20 --speed-limit 1024 --speed-time 30 --retry 2 -o "$2" "$1" </dev/null 2>"$2.err"
     elif command -v wget >/dev/null 2>&1; then wget -q -T 30 -t 3 -O "$2" "$1" </dev/null 2>"$2.err"
     else fail "neither curl nor wget is here to download $1; install one, or download the archive and checksums.txt elsewhere and run install.sh --archive FILE"; fi ||
       { why=$(sed -n '/./h; ${x;p;}' "$2.err" 2>/dev/null); why=${why:+ ($why)}; return 1; } ;;
  esac
}

# release_install installs the release archive for this machine: found in
# checksums.txt, verified, unpacked into a temporary folder, and installed
# with its own guard, which records where it came from for restore.sh.
release_install() {
  for c in uname mktemp tar gzip sha256sum awk; do
    command -v "$c" >/dev/null 2>&1 || fail "the release install needs $c, which is not in PATH"
  done
  [ "$(uname -s)" = Linux ] || fail "guard's releases are for Linux; this is $(uname -s)"
  case $(uname -m) in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) fail "guard's releases are built for linux amd64 and arm64, not $(uname -m); build it from source with Go (./install.sh in a checkout)" ;;
  esac
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  if [ -n "$archive" ]; then # offline: a local archive, its checksums.txt beside it
    [ -f "$archive" ] || fail "no archive $archive"
    [ -n "$sums" ] || sums=$(dirname "$archive")/checksums.txt
    [ -f "$sums" ] || fail "no $sums beside $archive to check it against; give it with --checksums FILE"
    name=$(basename "$archive")
    dir=$(cd "$(dirname "$archive")" && pwd)
    url=file://$dir/$name
    cp "$sums" "$tmp/checksums.txt"
    cp "$archive" "$tmp/$name"
  else
    if [ -z "$from" ]; then
      from=$releases/latest/download
      [ -z "$rel_version" ] || from=$releases/download/v${rel_version#v}
    fi
    from=${from%/}
    fetch "$from/checksums.txt" "$tmp/checksums.txt" || fail "could not download $from/checksums.txt$why (no network, or no such release?); offline, run install.sh --archive FILE with checksums.txt beside it"
    name=$(awk -v end="_linux_$arch.tar.gz" 'substr($2, length($2) - length(end) + 1) == end { print $2; exit }' "$tmp/checksums.txt")
    [ -n "$name" ] || fail "$from/checksums.txt lists no archive for linux $arch"
    url=$from/$name
    case $from in # record the version's own URL, which stays the same archive
    */releases/latest/download) v=${name#guard_} && url=${from%/latest/download}/download/v${v%_linux_*}/$name ;;
    esac
    echo "install.sh: downloading $from/$name" >&2
    fetch "$from/$name" "$tmp/$name" || fail "could not download $from/$name$why (no network?)"
  fi
  want=$(awk -v n="$name" '$2 == n { print $1; exit }' "$tmp/checksums.txt")
  [ -n "$want" ] || fail "checksums.txt has no line for $name"
  got=$(sha256sum "$tmp/$name" | awk '{ print $1 }')
  [ "$got" = "$want" ] || fail "$name has sha256 $got, but checksums.txt says $want: it is damaged or not the release's; not unpacked"
  echo "install.sh: $name matches checksums.txt (sha256 $want)" >&2
  mkdir "$tmp/x"
  tar -xzf "$tmp/$name" -C "$tmp/x" guard || fail "could not unpack guard from $name"
  "$tmp/x/guard" install --release-url "$url" --release-sha256 "$want" "$@" </dev/null
}

here=$(dirname "$0")
if [ -z "$mode" ] && ! { [ -f "$0" ] && [ -f "$here/go.mod" ] && [ -d "$here/cmd/guard" ]; }; then
  mode=release # on its own, as from a release: there is no source to build
fi
if [ -z "$mode" ] && ! command -v go >/dev/null 2>&1; then
  # The Go release go.mod asks for: the README and the messages name it
  # from there, so they cannot drift apart.
  need=$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' "$here/go.mod")
  echo "install.sh: Go is not installed or not in PATH; install Go $need or newer (https://go.dev/doc/install) to build from this checkout; installing the release archive for this machine instead" >&2
  mode=release
fi
if [ "$mode" = release ]; then
  release_install "$@"
  exit
fi
cd "$here"

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
  pid=$! n=0
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
start=$(date +%s) # not $SECONDS: POSIX sh has none
if ! build; then
  # A checkout git will not read (owned by another user, no .git) must not
  # stop the install: build again without the VCS stamp. Any other error is
  # the compiler's, shown as it is.
  grep -q 'VCS status' "$log" || failed
  echo "install.sh: git cannot read this checkout; building without the VCS stamp" >&2
  build -buildvcs=false || failed
fi
echo "install.sh: built $out/guard in $(($(date +%s) - start))s"

"$out/guard" install --source "$PWD" "$@"
