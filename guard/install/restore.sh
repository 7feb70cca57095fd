# guard: restore guard's copy in the shim folder after a sandbox evicted it.
# Written by guard install (run it again after changing [self]); the PATH block
# sources it only when the copy is missing or empty. By hand: sh THIS_FILE
(
set -f
shim='/tmp/TestInstallWritesThroughRCLinksButNotTheGuardCopy398231811/001/.shim' locks='/tmp/TestInstallWritesThroughRCLinksButNotTheGuardCopy398231811/001/.cache/guard/locks' src='' go='' sha='' urls='' hint='reinstall guard (./install.sh in its source folder), or name a copy in the manifest'\''s [self] urls and sha256'
g=$shim/guard
ok() { [ -s "$g" ] && [ -x "$g" ]; }
mkdir -p "$shim" "$locks" 2>/dev/null
if command -v flock >/dev/null 2>&1 && { exec 9>>"$locks/restore.lock"; } 2>/dev/null; then
	flock -n 9 || { echo "guard: waiting for another shell that is restoring $g" >&2; flock -w 1800 9; }
fi
how=
if ! ok && [ -n "$src" ] && [ -f "$src/install.sh" ]; then
	[ -x "$go" ] || go=$(command -v go 2>/dev/null) || go=
	if [ -n "$go" ]; then
		echo "guard: $g is missing or empty; rebuilding it from $src" >&2
		if PATH=${go%/*}:$PATH GUARD_SHIM_DIR=$shim bash "$src/install.sh" --no-rc </dev/null >&2; then how="rebuilt from $src"; fi
	fi
fi
if ! ok && [ -n "$sha" ]; then
	tmp=$shim/.guard-restore.$$
	for u in $urls; do
		echo "guard: $g is missing or empty; fetching it from $u" >&2
		rm -f "$tmp"
		case $u in
		file://*) p=${u#file://}; p=${p#localhost}; cp "$p" "$tmp" ;;
		*) if command -v curl >/dev/null 2>&1; then curl -fsSL --connect-timeout 10 --max-time 600 -o "$tmp" "$u"
		   elif command -v wget >/dev/null 2>&1; then wget -q -T 30 -O "$tmp" "$u"
		   else echo "guard: neither curl nor wget is here to fetch $u" >&2; false; fi ;;
		esac || continue
		set -- $(sha256sum "$tmp" 2>/dev/null)
		if [ "${1-}" != "$sha" ]; then echo "guard: $u served a file whose sha256 is ${1-unknown}, not $sha; not used" >&2; continue; fi
		chmod 755 "$tmp" && GUARD_SHIM_DIR=$shim "$tmp" install --no-rc </dev/null >/dev/null && { how="fetched from $u"; break; }
	done
	rm -f "$tmp"
fi
if ok; then
	[ -z "$how" ] || echo "guard: restored $g ($how)" >&2
else
	echo "guard: protection is off: $g is missing or empty and could not be restored; restore it: $hint" >&2
fi
)
