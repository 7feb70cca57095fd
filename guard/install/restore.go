package install

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandbox-guard/guard/guard/state"
)

// Restore says where guard's own executable comes back from when a sandbox
// evicted it: the source folder install.sh ran from (rebuilt when Go is
// there), else [self] urls with their pinned sha256, else the release
// archive install.sh installed from. A url ending .tar.gz is a release
// archive: restore.sh verifies it, unpacks guard from it and runs that.
type Restore struct {
	Source  string   // guard's source folder, "" when guard was not installed by install.sh from a checkout
	Go      string   // the go executable found at install time, tried before PATH
	URLs    []string // [self] urls, else the release archive's
	SHA256  string   // their sha256
	Release Release  // the release archive install.sh installed from, recorded in the install marker
}

// InstallerURL is the verified installer of guard's latest release
// (docs/install.md).
const InstallerURL = "https://github.com/sandbox-guard/guard/releases/latest/download/install.sh"

// Release is a release archive guard was installed from: where install.sh
// fetched it and the sha256 checksums.txt gave it.
type Release struct{ URL, SHA256 string }

// hint is the command the loud line names when nothing could restore guard.
func (r Restore) hint() string {
	if r.Source != "" {
		return "cd " + shellQuote(r.Source) + " && ./install.sh"
	}
	if r.Release.URL != "" {
		return "reinstall guard from its release: curl -fsSL " + InstallerURL + " | sh"
	}
	return "reinstall guard (./install.sh in its source folder), or name a copy in the manifest's [self] urls and sha256"
}

// offLine is the loud line a start-up file prints when guard's copy is
// gone and the restore script with it.
func offLine(guard string, r Restore) string {
	return "guard: protection is off: " + guard + " is missing or broken; restore it: " + r.hint()
}

// restoreFailed is the stamp of a restore that failed: restore.sh does not
// try again for 10 minutes, and an install, which has just put guard back,
// removes it.
func restoreFailed(stateDir string) string {
	return filepath.Join(stateDir, "locks", "restore.failed")
}

// restoreScript is restore.sh. It runs in a subshell, so nothing it sets
// stays in the person's shell; it takes a lock so that twenty shells
// started at once rebuild once; and whatever brings guard back then runs
// `guard install --no-rc`, which puts the copy and its links in place the
// way an install does. It prints one line, on stderr (a start-up file must
// not write on the stdout of `bash -lc CMD`): restored, or protection is
// off, or that the restore goes on in the background; what the rebuild or
// the fetch printed is in the restore log the line names.
//
// A shell's start is held for at most GUARD_RESTORE_WAIT seconds
// (restoreWait by default): the restore runs in the background from the
// start, and the shell waits for its line that long (timeout(1) reading a
// FIFO). Past it the shell says the restore goes on in the background and
// starts; the restore ends on its own (a stalled fetch is given up on, a
// build ends) and leaves its result for the next shell (the copy, or the
// failure stamp). See docs/surviving-eviction.md.
func restoreScript(shimDir, stateDir string, r Restore) string {
	urls := strings.Join(r.URLs, "\n") // one a line: a file:// URL may hold a space
	return strings.NewReplacer(
		"@SHIM@", shellQuote(shimDir),
		"@LOCKS@", shellQuote(filepath.Join(stateDir, "locks")),
		"@FAILED@", shellQuote(restoreFailed(stateDir)),
		"@LOG@", shellQuote(state.Layout{Dir: stateDir}.RestoreLog()),
		"@SRC@", shellQuote(r.Source),
		"@GO@", shellQuote(r.Go),
		"@SHA@", shellQuote(strings.ToLower(r.SHA256)),
		"@URLS@", shellQuote(urls),
		"@HINT@", shellQuote(r.hint()),
		"@STAMP@", CopyStamp,
		"@WAIT@", strconv.Itoa(restoreWait),
	).Replace(restoreTemplate)
}

// restoreWait is how many seconds a shell's start waits for a restore of
// guard's copy by default (GUARD_RESTORE_WAIT sets it): a fetch from a
// mirror or a file:// copy ends well within it, a rebuild from source
// seldom does.
const restoreWait = 5

const restoreTemplate = hookHeader + ` restore guard's copy in the shim folder after a sandbox evicted it.
# Written by guard install (run it again after changing [self]); the PATH block
# sources it only when the copy is missing or broken. By hand: sh THIS_FILE
# A shell's start waits for the restore at most GUARD_RESTORE_WAIT seconds
# (default @WAIT@; 0: not at all), then the restore goes on in the background
# and the shell says so in one line.
(
# Not the sourcing shell's set -e or -u: a step that fails (a state folder
# that cannot be written) must not end that shell before the one line.
set -f +eu
shim=@SHIM@ locks=@LOCKS@ src=@SRC@ go=@GO@ sha=@SHA@ urls=@URLS@ hint=@HINT@
g=$shim/guard stamp=$shim/@STAMP@ failed=@FAILED@ log=@LOG@
# The copy runs: a copy cut off elsewhere than at 0 bytes crashes here.
ok() { [ -s "$g" ] && [ -x "$g" ] && "$g" --version >/dev/null 2>&1 </dev/null; }
# A restore that failed is not tried again for 10 minutes: with BASH_ENV
# every bash would otherwise pay for another failed build.
recent() { [ -n "$(find "$failed" -mmin -10 2>/dev/null)" ]; }
mkdir -p "$shim" "$locks" 2>/dev/null
if ! ok && recent; then
	echo "guard: protection is off: $g is missing or broken; the last restore failed less than 10 minutes ago; restore it: $hint" >&2
	exit 0
fi
# restore brings the copy back under the lock and ends with its one line on
# fd 8 (an empty line when it has nothing to say: another shell restored
# the copy meanwhile); what it runs prints into the log.
restore() {
	if command -v flock >/dev/null 2>&1 && { exec 9>>"$locks/restore.lock"; } 2>/dev/null; then
		flock -w 1800 9
	fi
	if ! ok && recent; then
		echo "guard: protection is off: $g is missing or broken; the last restore failed less than 10 minutes ago; restore it: $hint" >&8
		return
	fi
	if ok; then echo >&8; return; fi
	# Made afresh (never through a link planted in its place).
	rm -f "$log" 2>/dev/null
	if (set -C; : >"$log") 2>/dev/null; then exec 2>>"$log"; else exec 2>/dev/null; fi
	how=
	if ! ok && [ -n "$src" ] && [ -f "$src/install.sh" ]; then
		[ -x "$go" ] || go=$(command -v go 2>/dev/null) || go=
		if [ -n "$go" ]; then
			echo "guard: $g is missing or broken; rebuilding it from $src" >&2
			if PATH=${go%/*}:$PATH GUARD_SHIM_DIR=$shim bash "$src/install.sh" --no-rc </dev/null >&2; then how="rebuilt from $src"; fi
		fi
	fi
	if ! ok && [ -n "$sha" ]; then
		tmp=$shim/.guard-restore-$$
		IFS='
' # the urls are one a line
		for u in $urls; do
			echo "guard: $g is missing or broken; fetching it from $u" >&2
			rm -f "$tmp"
			case $u in
			file://*) p=${u#file://}; p=${p#localhost}; cp "$p" "$tmp" ;;
			*) # a stalled server is given up on: under 1 KiB/s for 15 s (curl), 15 s without a byte (wget)
			   if command -v curl >/dev/null 2>&1; then curl -fsSL --connect-timeout 10 --speed-limit 1024 --speed-time 15 --max-time 600 -o "$tmp" "$u"
			   elif command -v wget >/dev/null 2>&1; then wget -q -T 15 -t 1 -O "$tmp" "$u"
			   else echo "guard: neither curl nor wget is here to fetch $u" >&2; false; fi ;;
			esac || continue
			got=$(sha256sum <"$tmp" 2>/dev/null) && got=${got%% *} || got=unknown
			if [ "$got" != "$sha" ]; then echo "guard: $u served a file whose sha256 is $got, not $sha; not used" >&2; continue; fi
			# Run as guard: by any other name it would be a shim call.
			run=$tmp.d/guard; rm -rf "$tmp.d"; mkdir "$tmp.d" || continue
			case $u in # a release archive: guard is in it
			*.tar.gz) tar -xzf "$tmp" -C "$tmp.d" guard ;;
			*) mv "$tmp" "$run" ;;
			esac || continue
			chmod 755 "$run" && GUARD_SHIM_DIR=$shim "$run" install --no-rc </dev/null >/dev/null && { how="fetched from $u"; break; }
		done
		rm -rf "$tmp" "$tmp.d"
	fi
	if ok; then
		rm -f "$failed"
		touch -r "$g" "$stamp" 2>/dev/null # a copy that runs is as good as install left it
		line="guard: restored $g ($how; its output is in $log)"
		[ -n "$how" ] || line=
	else
		: >"$failed" 2>/dev/null
		line="guard: protection is off: $g is missing or broken and could not be restored (why: $log); restore it: $hint"
	fi
	[ -z "$line" ] || echo "$line" >&2 # the log keeps it: a shell that stopped waiting did not show it
	echo "$line" >&8
}
hold=${GUARD_RESTORE_WAIT-@WAIT@}
case $hold in ''|*[!0-9]*) hold=@WAIT@ ;; esac
# The restore runs in the background, its line coming through a FIFO the
# shell reads for at most $hold seconds; without mkfifo or timeout(1) it
# runs in the foreground, as long as it takes.
d=$(mktemp -d "${TMPDIR:-/tmp}/guard-restore.XXXXXX" 2>/dev/null) || d=
if [ -n "$d" ] && command -v timeout >/dev/null 2>&1 && mkfifo -m 600 "$d/line" 2>/dev/null && exec 7<>"$d/line"; then
	# Nothing of the shell's: not its output (a caller waiting for its end
	# of file), not its hangup or ^C.
	(trap '' HUP INT QUIT; restore 8>&7 7>&-) </dev/null >/dev/null 2>/dev/null &
	line=$( [ "$hold" -gt 0 ] && timeout "$hold" head -n 1 <&7) || line="guard: restoring $g takes more than ${hold}s; it goes on in the background (its output is in $log), and calls before it is back run without guard"
	exec 7>&-
	rm -rf "$d"
	[ -z "$line" ] || echo "$line" >&2
else
	[ -z "$d" ] || rm -rf "$d"
	restore 8>&2
fi
)
`
