package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The documentation is the README (the first five minutes) and one page per
// subject in docs/. These tests keep the pages joined up: every relative
// link in every Markdown file of the repository leads to a file that exists
// and, with a #fragment, to a heading that exists there (GitHub's slugs),
// and the README links every page of docs/.

// TestDocLinksResolve fails on a relative link to a file that is not there
// or to an anchor its target does not have.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot()
	files := markdownFiles(t, root)
	if len(files) < 2 {
		t.Fatalf("found %d Markdown files under %s; want the README and docs/", len(files), root)
	}
	for _, file := range files {
		rel, _ := filepath.Rel(root, file)
		for _, l := range relativeLinks(t, file) {
			for _, problem := range checkLink(file, l.target) {
				t.Errorf("%s:%d: link %q: %s", rel, l.line, l.target, problem)
			}
		}
	}
}

// TestReadmeLinksEveryDocsPage fails when a page in docs/ (a docs/*.md, or a
// folder's README.md) is not linked from README.md: a page nobody can find
// from the first five minutes.
func TestReadmeLinksEveryDocsPage(t *testing.T) {
	root := repoRoot()
	linked := map[string]bool{}
	for _, l := range relativeLinks(t, filepath.Join(root, "README.md")) {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.Clean(filepath.Join(root, path))] = true
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	folders, _ := filepath.Glob(filepath.Join(root, "docs", "*", "README.md"))
	pages = append(pages, folders...)
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	for _, page := range pages {
		if !linked[page] {
			rel, _ := filepath.Rel(root, page)
			t.Errorf("README.md does not link %s; add it to the README's list of pages", rel)
		}
	}
}

// TestCheckLinkCatchesBreakage holds the checker itself to account: a link
// to a missing file and one to a missing heading are both reported, and a
// good one is not.
func TestCheckLinkCatchesBreakage(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "a.md")
	os.WriteFile(page, []byte("# Title\n\n## Exit status of a shim call\n\n[x](b.md#nowhere) [y](missing.md) [z](#exit-status-of-a-shim-call) [w](b.md#guard-status---json)\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.md"), []byte("## guard status --json\n\n```sh\n# not a heading\n```\n"), 0o644)
	var got []string
	for _, l := range relativeLinks(t, page) {
		if len(checkLink(page, l.target)) > 0 {
			got = append(got, l.target)
		}
	}
	if strings.Join(got, " ") != "b.md#nowhere missing.md" {
		t.Errorf("broken links found: %q; want b.md#nowhere and missing.md only", got)
	}
	if problems := checkLink(page, "b.md#not-a-heading"); len(problems) == 0 {
		t.Error("a comment line in a code block counted as a heading")
	}
}

type link struct {
	target string
	line   int
}

// markdownFiles lists every *.md of the repository, not .git's.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// .git, and what builds write (.gitignore's /bin and /dist: a
		// release snapshot's npm README links pages it does not carry).
		if d.IsDir() && (d.Name() == ".git" || p == filepath.Join(root, "bin") || p == filepath.Join(root, "dist")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// relativeLinks returns the file's inline links that are not URLs, outside
// fenced code blocks and code spans.
func relativeLinks(t *testing.T, file string) []link {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var links []link
	for i, text := range proseLines(string(data)) {
		text = codeSpan.ReplaceAllString(text, "code")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			if !scheme.MatchString(m[1]) {
				links = append(links, link{m[1], i + 1})
			}
		}
	}
	return links
}

// proseLines is the file's lines with those of fenced code blocks blanked,
// so that line numbers stay the file's.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// checkLink says what is wrong with a relative link target in file: its
// file missing, or its #fragment naming no heading of the target.
func checkLink(file, target string) []string {
	path, fragment, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.Join(filepath.Dir(file), path)
	}
	info, err := os.Stat(dest)
	if err != nil {
		return []string{"no such file " + dest}
	}
	if fragment == "" {
		return nil
	}
	if info.IsDir() || !strings.HasSuffix(dest, ".md") {
		return []string{"an anchor in a file that is not Markdown"}
	}
	data, err := os.ReadFile(dest)
	if err != nil {
		return []string{err.Error()}
	}
	anchors := headingAnchors(string(data))
	if !anchors[fragment] {
		return []string{"no heading with the anchor #" + fragment + " in " + filepath.Base(dest)}
	}
	return nil
}

var linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// headingAnchors is the set of anchors GitHub gives the headings of a
// Markdown text: lower case, the heading's text without markup, spaces as
// hyphens, punctuation other than - and _ dropped, a repeat suffixed -1, -2.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(text) {
		hashes := len(l) - len(strings.TrimLeft(l, "#"))
		if hashes == 0 || hashes > 6 || !strings.HasPrefix(l[hashes:], " ") {
			continue
		}
		heading := linkText.ReplaceAllString(strings.TrimSpace(l[hashes:]), "$1")
		var slug strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// TestStatusHelpSaysWhatReadmeSays: `guard --help` and `guard status --help`
// give status's exit rule in the README's words, so that neither can say
// "exit 1 when something needs healing" while a fresh install exits 0.
func TestStatusHelpSaysWhatReadmeSays(t *testing.T) {
	_, rule, ok := strings.Cut(newStatusCommand().Usage, "; ")
	if !ok || !strings.HasPrefix(rule, "exit ") {
		t.Fatalf("status's usage %q has no exit rule after its purpose", newStatusCommand().Usage)
	}
	data, err := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(data)), " ")
	if !strings.Contains(readme, "`guard status`: "+rule) {
		t.Errorf("README.md does not say %q of guard status; the help and the README must agree", "`guard status`: "+rule)
	}
}

// TestSkipsSayWhy: a test that does not run says so and why. In Go a skip
// has a reason (t.Skip("…"), never a bare Skip or SkipNow); in a
// testscript a condition only guards a skip with a reason ([!exec:fish]
// skip 'fish is not installed …'), never a check that then silently does
// not run.
func TestSkipsSayWhy(t *testing.T) {
	root := repoRoot()
	bare := regexp.MustCompile(`\.(Skip\(\)|SkipNow\(\))`)
	condLine := regexp.MustCompile(`^\[[^\]]+\]\s+(\S+)(.*)$`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// .git, and what builds write (.gitignore's /bin and /dist: a
		// release snapshot's npm README links pages it does not carry).
		if d.IsDir() && (d.Name() == ".git" || p == filepath.Join(root, "bin") || p == filepath.Join(root, "dist")) {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case strings.HasSuffix(p, "_test.go"):
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for i, l := range strings.Split(string(data), "\n") {
				if bare.MatchString(l) {
					t.Errorf("%s:%d: a skip without a reason: say what did not run and why", rel, i+1)
				}
			}
		case strings.HasSuffix(p, ".txtar") && strings.Contains(rel, "script"):
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for i, l := range strings.Split(string(data), "\n") {
				if strings.HasPrefix(l, "-- ") {
					break // the script ends where its files begin
				}
				m := condLine.FindStringSubmatch(l)
				switch {
				case m == nil:
				case m[1] != "skip":
					t.Errorf("%s:%d: %q runs only under its condition and says nothing otherwise; move it to a script that skips with a reason", rel, i+1, l)
				case strings.TrimSpace(m[2]) == "":
					t.Errorf("%s:%d: a skip without a reason: say what did not run and why", rel, i+1)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// repoPath matches a code span that names a file or folder of this
// repository: it starts with one of the repository's top-level names.
var repoPath = regexp.MustCompile("`((?:cmd|guard|manifest|shims|testdata|docs|\\.ci)/[^`\\s]*|install\\.sh|go\\.mod|README\\.md)`")

// TestDocsNameFilesThatExist: every repository path a Markdown file names
// in a code span exists (a pattern such as testdata/script/*.txtar matches
// something), so a page cannot point at a file that moved.
func TestDocsNameFilesThatExist(t *testing.T) {
	root := repoRoot()
	for _, file := range markdownFiles(t, root) {
		rel, _ := filepath.Rel(root, file)
		for i, l := range proseLines(readText(t, file)) {
			for _, m := range repoPath.FindAllStringSubmatch(l, -1) {
				name := strings.TrimSuffix(m[1], "/")
				if matches, _ := filepath.Glob(filepath.Join(root, name)); len(matches) == 0 {
					t.Errorf("%s:%d: names %s, which is not in the repository", rel, i+1, m[1])
				}
			}
		}
	}
}

// TestContributingIsTrue holds docs/contributing.md to the code: its fuzz
// table lists exactly the Fuzz functions there are, package by package; the
// tests and environment variables it names exist; the cmd/bench commands it
// names are cmd/bench's; and CI runs the test command it and the README
// show.
func TestContributingIsTrue(t *testing.T) {
	root := repoRoot()
	doc := readText(t, filepath.Join(root, "docs", "contributing.md"))

	listed := map[string]bool{}
	row := regexp.MustCompile("^\\| `([a-z/]+)` \\| (`Fuzz[^|]*)\\|$")
	for _, l := range strings.Split(doc, "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			for _, f := range regexp.MustCompile("`(Fuzz\\w+)`").FindAllStringSubmatch(m[2], -1) {
				listed[m[1]+"."+f[1]] = true
			}
		}
	}
	have := map[string]bool{}
	fuzz := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	tests := map[string]bool{}
	test := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	var testCode strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		text := readText(t, p)
		testCode.WriteString(text)
		pkg, _ := filepath.Rel(root, filepath.Dir(p))
		for _, m := range fuzz.FindAllStringSubmatch(text, -1) {
			have[pkg+"."+m[1]] = true
		}
		for _, m := range test.FindAllStringSubmatch(text, -1) {
			tests[m[1]] = true
		}
		return nil
	})
	if len(have) == 0 {
		t.Fatal("found no Fuzz functions")
	}
	for f := range have {
		if !listed[f] {
			t.Errorf("docs/contributing.md's fuzz table does not list %s", f)
		}
	}
	for f := range listed {
		if !have[f] {
			t.Errorf("docs/contributing.md's fuzz table lists %s, which does not exist", f)
		}
	}

	for _, m := range regexp.MustCompile("`(Test[A-Z]\\w*)`").FindAllStringSubmatch(doc, -1) {
		if !tests[m[1]] {
			t.Errorf("docs/contributing.md names %s, which is no test", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`\bGUARD_[A-Z_]+`).FindAllString(doc, -1) {
		if !strings.Contains(testCode.String(), `"`+m+`"`) {
			t.Errorf("docs/contributing.md names %s, which no test reads", m)
		}
	}
	bench := readText(t, filepath.Join(root, "cmd", "bench", "main.go"))
	for _, m := range regexp.MustCompile(`go run \./cmd/bench (\w+)`).FindAllStringSubmatch(doc, -1) {
		if !regexp.MustCompile(`(?m)^  ` + m[1] + ` `).MatchString(bench) {
			t.Errorf("docs/contributing.md runs go run ./cmd/bench %s, which is not a cmd/bench command", m[1])
		}
	}

	const command = "go test -race ./..."
	ci := readText(t, filepath.Join(root, ".ci", "run"))
	// The command as the README gives it, its output possibly piped on
	// (.ci/run keeps it to name the slowest packages; pipefail is set).
	if !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(command)+`( 2>&1 \| tee "\$out")?$`).MatchString(ci) || !strings.Contains(ci, "set -euo pipefail") {
		t.Errorf(".ci/run does not run %q", command)
	}
	// The checks beside the tests (docs/contributing.md, CI): go vet, and
	// staticcheck installed at a pinned version, each finding failing the run.
	if !regexp.MustCompile(`(?m)^go vet \./\.\.\.$`).MatchString(ci) {
		t.Error(".ci/run does not run go vet ./...")
	}
	if !regexp.MustCompile(`(?m)^staticcheck_version=v\d+\.\d+\.\d+$`).MatchString(ci) ||
		!strings.Contains(ci, `go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"`) ||
		!regexp.MustCompile(`(?m)^"\$gobin/staticcheck" \./\.\.\.$`).MatchString(ci) {
		t.Error(".ci/run does not install staticcheck at a pinned version and run it on ./...")
	}
	for _, page := range []string{"README.md", "docs/contributing.md"} {
		if !strings.Contains(readText(t, filepath.Join(root, page)), "\n"+command+"     # the tests") {
			t.Errorf("%s does not show the test command %q", page, command)
		}
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
