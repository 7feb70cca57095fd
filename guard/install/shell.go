package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The PATH block is the only text guard adds to a shell's start-up files.
// On a healthy start it costs six file tests and a case, builtins all:
// guard's copy is there, not empty and as install left it, the shim folder
// is not newer than guard's last check of its links (whose stamp is
// there), and the folder leads PATH. Only when a link changed does it run guard (`guard mend`, silent);
// only when the copy is gone does it source the restore script
// (docs/surviving-eviction.md, "Surviving the eviction of guard itself");
// with that gone too it prints one line saying protection is off and what
// brings it back.
const (
	blockStart = "# >>> guard: shims first in PATH >>>"
	blockEnd   = "# <<< guard <<<"
	// hookHeader starts every hook file guard writes, so uninstall removes
	// only its own.
	hookHeader = "# guard:"
	// createdLine opens the block in a start-up file guard created: when
	// uninstall leaves nothing else in it, the file goes too ("remove
	// exactly what install added"); a file the person had stays, even empty.
	createdLine = "# (guard created this file; guard uninstall removes it when nothing else is in it)"
)

// Where each start-up file gets the block. ~/.bashrc: at the top, before
// Debian's "if not running interactively, return", which ends a
// non-interactive bash (bash -lc sources ~/.bashrc from ~/.profile). The
// login files: at the end, after the lines that prepend ~/.local/bin, so
// the shims stay first.
type place int

const (
	atTop place = iota
	atEnd
)

// rcFile is a start-up file guard edits and where in it the block goes;
// onlyIfThere files are edited only when the person has one (bash reads
// ~/.bash_profile or ~/.bash_login instead of ~/.profile when one exists,
// so a block must be there too, but creating one would hide ~/.profile).
type rcFile struct {
	name        string
	where       place
	onlyIfThere bool
}

var rcFiles = []rcFile{
	{".bashrc", atTop, false},
	{".bash_profile", atEnd, true},
	{".bash_login", atEnd, true},
	{".profile", atEnd, false},
}

// hooks names the hook files in the config folder (next to the manifest):
// small text a sandbox's eviction spares.
type hooks struct{ dir string }

func (h hooks) restore() string { return filepath.Join(h.dir, "restore.sh") }
func (h hooks) env() string     { return filepath.Join(h.dir, "env.sh") }
func (h hooks) prewarm() string { return filepath.Join(h.dir, "prewarm.sh") }
func (h hooks) all() []string   { return []string{h.restore(), h.env(), h.prewarm()} }

// blockSpec is one PATH block: every field but off is a shell word, ready
// to paste.
type blockSpec struct {
	shimDir, guard, stamp, restore string
	links                          string // LinksStamp; "" when the block does not mend links (--system)
	bashEnv, prewarm               string // "" when that mode is not installed
	off                            string // the loud line, plain text
}

// body is the block's shell text, without the markers: env.sh holds it
// alone for BASH_ENV.
func (b blockSpec) body() string {
	var s strings.Builder
	// Present, executable and as install left it (its mtime the stamp's):
	// test builtins only, nothing started on a healthy start.
	fmt.Fprintf(&s, "if [ -s %s ] && [ -x %s ] && ! [ %s -nt %s ] && ! [ %s -ot %s ]; then", b.guard, b.guard, b.guard, b.stamp, b.guard, b.stamp)
	if b.links != "" {
		// A link evicted since guard's last full check (the folder is
		// newer than its stamp, or the stamp is gone: dash's -nt is false
		// then, bash's true): guard mends the folder, silent when it can.
		// Its status is not the shell's: a start-up file sourced under
		// set -e must not end the shell when mend cannot work.
		fmt.Fprintf(&s, "\n\tif [ %s -nt %s ] || ! [ -e %s ]; then %s mend </dev/null >/dev/null || :; fi\n", b.shimDir, b.links, b.links, b.guard)
	} else {
		s.WriteString(" :\n")
	}
	fmt.Fprintf(&s, "elif [ -r %s ]; then . %s\n", b.restore, b.restore)
	fmt.Fprintf(&s, "else echo %s >&2\nfi\n", shellQuote(b.off))
	fmt.Fprintf(&s, "case \":$PATH:\" in :%s:*) ;; *) PATH=%s:\"$PATH\"; export PATH ;; esac\n", b.shimDir, b.shimDir)
	return s.String()
}

func (b blockSpec) block() string {
	s := blockStart + "\n" + b.body()
	if b.bashEnv != "" {
		s += fmt.Sprintf("if [ -z \"${BASH_ENV-}\" ]; then BASH_ENV=%s; export BASH_ENV; fi\n", b.bashEnv)
	}
	if b.prewarm != "" {
		s += fmt.Sprintf("if [ -r %s ]; then . %s; fi\n", b.prewarm, b.prewarm)
	}
	return s + blockEnd + "\n"
}

// shellWord writes path for a start-up file: under $HOME when it is below
// the home folder (so the block survives a moved home), else quoted whole.
func shellWord(home, path string) string {
	if rel, err := filepath.Rel(home, path); err == nil && home != "" && rel != "." && !strings.HasPrefix(rel, "..") && plainPath(rel) {
		return `"$HOME/` + rel + `"`
	}
	return shellQuote(path)
}

// plainPath: nothing in p that a double-quoted shell word would expand.
func plainPath(p string) bool {
	for _, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/+@%,", c)) {
			return false
		}
	}
	return true
}

// ExportPath is the line a person runs to put dir first in this shell's
// PATH: `export PATH="DIR:$PATH"`, with DIR single-quoted when it holds
// anything a shell would expand or split (a folder named by someone else
// must not run code when the line is pasted).
func ExportPath(dir string) string {
	if plainPath(dir) {
		return `export PATH="` + dir + `:$PATH"`
	}
	return `export PATH=` + shellQuote(dir) + `":$PATH"`
}

// EnvPath is the environment entry an agent harness sets: PATH=DIR:$PATH,
// quoted like ExportPath.
func EnvPath(dir string) string {
	if plainPath(dir) {
		return "PATH=" + dir + ":$PATH"
	}
	return "PATH=" + shellQuote(dir) + `":$PATH"`
}

// ShellWord is s as it can be pasted into a shell: as it is when nothing
// in it would expand or split, else single-quoted.
func ShellWord(s string) string {
	if plainPath(s) {
		return s
	}
	return shellQuote(s)
}

// shellQuote is s as one single-quoted shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// placeBlock puts block in the file at where, replacing any older guard
// block (wherever it was); it reports whether the file changed.
func placeBlock(path, block string, where place) (bool, error) {
	old, err := readUserFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	rest, _ := cut(string(old))
	if errors.Is(err, fs.ErrNotExist) || strings.Contains(string(old), createdLine) && strings.TrimSpace(rest) == "" {
		block = strings.Replace(block, blockStart+"\n", blockStart+"\n"+createdLine+"\n", 1)
	}
	var next string
	switch where {
	case atTop:
		next = block + rest
	default:
		if rest != "" && !strings.HasSuffix(rest, "\n") {
			rest += "\n"
		}
		next = rest + block
	}
	if next == string(old) {
		return false, nil
	}
	if err := writeUserFile(path, []byte(next), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// What removeBlock did to a start-up file.
type removal int

const (
	removedNothing removal = iota // no block there
	removedBlock                  // the block, the person's lines kept
	removedFile                   // the file install created, nothing else in it
)

// removeBlock takes guard's block out of the start-up file at path, and
// the file itself when install created it and nothing else is in it.
func removeBlock(path string) (removal, error) {
	old, err := readUserFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return removedNothing, nil
	}
	if err != nil {
		return removedNothing, fmt.Errorf("read %s: %w", path, err)
	}
	rest, found := cut(string(old))
	if !found {
		return removedNothing, nil
	}
	if strings.Contains(string(old), createdLine) && strings.TrimSpace(rest) == "" {
		if err := os.Remove(path); err != nil {
			return removedNothing, fmt.Errorf("remove %s: %w", path, err)
		}
		return removedFile, nil
	}
	if err := writeUserFile(path, []byte(rest), 0o644); err != nil {
		return removedNothing, fmt.Errorf("write %s: %w", path, err)
	}
	return removedBlock, nil
}

// cut removes every guard block from s.
func cut(s string) (string, bool) {
	found := false
	for {
		i := strings.Index(s, blockStart)
		if i < 0 {
			return s, found
		}
		j := strings.Index(s[i:], blockEnd)
		if j < 0 {
			return s, found
		}
		end := i + j + len(blockEnd)
		if end < len(s) && s[end] == '\n' {
			end++
		}
		s, found = s[:i]+s[end:], true
	}
}

// writeHook writes one of guard's hook files when its text changed.
func writeHook(path, text string) (bool, error) {
	if old, err := readUserFile(path); err == nil && string(old) == text {
		return false, nil
	}
	if err := writeUserFile(path, []byte(text), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}

// removeHook removes a hook file guard wrote (it starts with hookHeader);
// a file of the same name the person wrote stays.
func removeHook(path string) bool {
	b, err := readUserFile(path)
	if err != nil || !strings.HasPrefix(string(b), hookHeader) {
		return false
	}
	return os.Remove(path) == nil
}

// envHook is env.sh, the file BASH_ENV names: the block's body, so a
// non-interactive bash started with a PATH that lacks the shims (an agent
// harness, a script that resets PATH) gets them back.
func envHook(b blockSpec) string {
	return hookHeader + " shims first in PATH for non-interactive bash (BASH_ENV); written by guard install --bash-env\n" + b.body()
}

// prewarmHook is prewarm.sh: one test per file guard keeps (tool binaries,
// models) and, when one is missing, a background heal. guard itself keeps
// the heal to once per interval, so a shell start that finds everything
// there costs only the tests. The heal's status is not the shell's: a
// start-up file sourced under set -e must not end the shell when it cannot
// start (a broken manifest).
func prewarmHook(guardWord string, artifacts []string) string {
	var tests []string
	for _, a := range artifacts {
		tests = append(tests, "[ -e "+shellQuote(a)+" ]")
	}
	if len(tests) == 0 {
		tests = []string{"true"}
	}
	return hookHeader + " start a background heal when something guard keeps is missing; written by guard install --prewarm\n" +
		fmt.Sprintf("if [ -x %s ] && ! { %s; }; then %s heal --background --prewarm </dev/null || :; fi\n",
			guardWord, strings.Join(tests, " && "), guardWord)
}
