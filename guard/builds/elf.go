package builds

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// systemLibDirs are searched after ld.so.conf's folders, as ld.so does with
// its trusted defaults.
var systemLibDirs = []string{
	"/lib", "/usr/lib",
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib64", "/usr/lib64",
}

// ldSoConf is the loader configuration read on the slow path.
var ldSoConf = "/etc/ld.so.conf"

var (
	confOnce sync.Once
	confDirs []string
)

// searchDirs returns ld.so.conf's folders then the system ones, parsed once
// per process and only when a binary needs a full check.
func searchDirs() []string {
	confOnce.Do(func() {
		seen := map[string]bool{}
		for _, d := range append(parseLDConf(ldSoConf, 0), systemLibDirs...) {
			if !seen[d] {
				seen[d] = true
				confDirs = append(confDirs, d)
			}
		}
	})
	return confDirs
}

// parseLDConf reads an ld.so.conf file: one folder a line, "#" comments,
// "include GLOB" (relative to the file's folder), "hwcap" lines ignored.
func parseLDConf(path string, depth int) []string {
	if depth > 8 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "include":
			for _, pat := range fields[1:] {
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(path), pat)
				}
				matches, _ := filepath.Glob(pat)
				for _, m := range matches {
					dirs = append(dirs, parseLDConf(m, depth+1)...)
				}
			}
		case "hwcap":
		default:
			// Old syntax allows "dir=type" and comma or space lists.
			for _, d := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == ':' }) {
				if i := strings.IndexByte(d, '='); i >= 0 {
					d = d[:i]
				}
				if filepath.IsAbs(d) {
					dirs = append(dirs, filepath.Clean(d))
				}
			}
		}
	}
	return dirs
}

// elfObject is what the loader reads from one ELF file.
type elfObject struct {
	file    fileStat // the file as it was parsed, for the stamp
	class   elf.Class
	machine elf.Machine
	interp  string
	needed  []string
	rpath   []string // $ORIGIN already expanded
	runpath []string
}

// readELF parses the dynamic section of path. debug/elf is fuzzed, but a
// shim must not crash on a strange file, so a panic becomes an error.
func readELF(path string) (obj *elfObject, err error) {
	defer func() {
		if r := recover(); r != nil {
			obj, err = nil, fmt.Errorf("parse %s: %v", path, r)
		}
	}()
	osf, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer osf.Close()
	fi, err := osf.Stat()
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(osf)
	if err != nil {
		return nil, err
	}
	obj = &elfObject{file: statOf(path, fi), class: f.Class, machine: f.Machine}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			buf := make([]byte, min(p.Filesz, 4096))
			if _, err := p.ReadAt(buf, 0); err != nil {
				return nil, fmt.Errorf("read interpreter: %w", err)
			}
			obj.interp = strings.TrimRight(string(buf), "\x00")
		}
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("not an executable or shared object (%s)", f.Type)
	}
	if obj.needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return nil, fmt.Errorf("read needed libraries: %w", err)
	}
	origin := filepath.Dir(path)
	rp, _ := f.DynString(elf.DT_RPATH)
	rn, _ := f.DynString(elf.DT_RUNPATH)
	obj.rpath = expandPaths(rp, origin)
	obj.runpath = expandPaths(rn, origin)
	return obj, nil
}

// Linkage reads what `guard status` shows of the ELF file at path: the
// shared libraries it names (DT_NEEDED, not resolved), and whether it is
// static (no libraries, no interpreter). A script, or a file that does not
// parse as an executable or shared object, has no libraries and is not
// static: there is nothing to say about it.
func Linkage(path string) (libs []string, static bool) {
	obj, err := readELF(path)
	if err != nil {
		return nil, false
	}
	if len(obj.needed) > 0 {
		return obj.needed, false
	}
	return nil, obj.interp == ""
}

// Libraries resolves the ELF file at path the way its loader will, with
// libraryPath as LD_LIBRARY_PATH: the files it loads (its interpreter
// first), and the names that resolve to nothing. A file that is not ELF
// loads nothing.
func Libraries(path, libraryPath string) (found, missing []string) {
	res, err := resolveELF(path, libraryPath)
	if err != nil {
		return nil, nil
	}
	for _, f := range res.found {
		found = append(found, f.path)
	}
	return found, res.missing
}

func expandPaths(entries []string, origin string) []string {
	var out []string
	for _, e := range entries {
		for _, d := range strings.Split(e, ":") {
			d = strings.ReplaceAll(d, "${ORIGIN}", origin)
			d = strings.ReplaceAll(d, "$ORIGIN", origin)
			if d == "" {
				d = "." // an empty entry means the current folder to ld.so
			}
			out = append(out, d)
		}
	}
	return out
}

// resolution is the outcome of walking a binary's dependency tree.
type resolution struct {
	found         []fileStat // every resolved file, interpreter first
	missing       []string   // sonames that did not resolve
	broken        []string   // "path (why)" of libraries ld.so would refuse
	missingInterp string
}

// resolveELF follows DT_NEEDED breadth-first from path, resolving each name
// in ld.so's order: DT_RPATH (of the object, then of the executable) when the
// object has no DT_RUNPATH, LD_LIBRARY_PATH, DT_RUNPATH, then ld.so.conf and
// the system folders. Candidates of another class or machine are skipped, as
// ld.so skips them; a candidate that is not a loadable ELF object at all (a
// library cut short by a killed linker) ends the search, as ld.so ends it
// with "file too short".
func resolveELF(path, libraryPath string) (*resolution, error) {
	real, err := filepath.EvalSymlinks(path) // ld.so's $ORIGIN is the real folder
	if err != nil {
		return nil, err
	}
	exe, err := readELF(real)
	if err != nil {
		return nil, err
	}
	res := &resolution{}
	if exe.interp != "" {
		if fi, err := os.Stat(exe.interp); err == nil {
			res.found = append(res.found, statOf(exe.interp, fi))
		} else if errors.Is(err, os.ErrNotExist) {
			res.missingInterp = exe.interp
			res.missing = append(res.missing, exe.interp)
		}
	}
	ldPath := filepath.SplitList(libraryPath)
	resolved := map[string]bool{}
	type pending struct {
		obj  *elfObject
		name string
	}
	var queue []pending
	for _, n := range exe.needed {
		queue = append(queue, pending{exe, n})
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if resolved[p.name] {
			continue
		}
		resolved[p.name] = true
		obj, bad := findLibrary(p.name, p.obj, exe, ldPath)
		if bad != "" {
			res.broken = append(res.broken, bad)
		}
		if obj == nil {
			res.missing = append(res.missing, p.name)
			continue
		}
		res.found = append(res.found, obj.file)
		for _, n := range obj.needed {
			queue = append(queue, pending{obj, n})
		}
	}
	return res, nil
}

// findLibrary returns the object name resolves to, or nil; bad describes a
// candidate that stopped the search.
func findLibrary(name string, from, exe *elfObject, ldPath []string) (obj *elfObject, bad string) {
	if strings.Contains(name, "/") {
		return tryLibrary(name, exe)
	}
	var dirs []string
	if len(from.runpath) == 0 {
		dirs = append(dirs, from.rpath...)
		if from != exe && len(exe.runpath) == 0 {
			dirs = append(dirs, exe.rpath...)
		}
	}
	dirs = append(dirs, ldPath...)
	dirs = append(dirs, from.runpath...)
	dirs = append(dirs, searchDirs()...)
	for _, d := range dirs {
		if obj, bad := tryLibrary(filepath.Join(d, name), exe); obj != nil || bad != "" {
			return obj, bad
		}
	}
	return nil, ""
}

// tryLibrary reads one candidate as ld.so would: one that is absent, not a
// regular file, or of another class or machine is skipped (nil, ""); one
// that exists but does not parse stops the search (nil, "path (why)").
func tryLibrary(file string, exe *elfObject) (*elfObject, string) {
	fi, err := os.Stat(file)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, ""
	}
	obj, err := readELF(file)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, "" // ld.so cannot open it either and goes on
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("file too short") // ld.so's words for it
		}
		return nil, fmt.Sprintf("%s (%v)", file, err)
	}
	if obj.class != exe.class || obj.machine != exe.machine {
		return nil, ""
	}
	return obj, ""
}
