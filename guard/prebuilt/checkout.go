package prebuilt

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/resolve"
)

// Clean says why a checkout whose stash key (package stash) has source and
// build environment env is not exactly a release, "" when it is: its
// sources are git's HEAD with no edit, no untracked or ignored source
// file, and no build environment variable that changes the result
// (CFLAGS, CMAKE_*, ...). It returns HEAD's commit.
func Clean(source string, env []string) (commit, why string) {
	rev, ok := strings.CutPrefix(source, "git ")
	switch {
	case !ok:
		return "", "the sources are not a git checkout"
	case strings.Contains(rev, " dirty "):
		return "", "the checkout has edits (its stash key says dirty)"
	case len(env) > 0:
		return "", "the build's environment changes its result (" + strings.Join(env, " ") + ")"
	}
	return rev, ""
}

// gitTimeout bounds each git run of Tags.
const gitTimeout = 30 * time.Second

// Tags are the release tags that may name dir's HEAD, in the order to ask
// the API: the checkout's own tags at HEAD, then llama.cpp's scheme, b
// and the commit count of HEAD (`git rev-list --count HEAD`), which only
// a full clone can count and which the API's answer must confirm. A
// shallow clone has no count: it gives only its own tags, and says why
// when it has none.
func Tags(ctx context.Context, dir, pathEnv string) (tags []string, counted string, err error) {
	git, ok := resolve.LookPath("git", pathEnv)
	if !ok {
		return nil, "", errors.New("git is not on PATH")
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, gitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, git, append([]string{"-C", dir}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s in %s: %w", args[0], dir, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	out, err := run("tag", "--points-at", "HEAD")
	if err != nil {
		return nil, "", err
	}
	tags = strings.Fields(out)
	shallow, err := run("rev-parse", "--is-shallow-repository")
	if err != nil {
		return nil, "", err
	}
	if shallow == "true" {
		if len(tags) == 0 {
			return nil, "", errors.New("the checkout is a shallow clone: its commit count names no release")
		}
		return tags, "", nil
	}
	n, err := run("rev-list", "--count", "HEAD")
	if err != nil {
		return nil, "", err
	}
	counted = "b" + n
	for _, t := range tags {
		if t == counted {
			return tags, "", nil
		}
	}
	return append(tags, counted), counted, nil
}
