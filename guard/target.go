package guard

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/sandbox-guard/guard/guard/resolve"
	"github.com/sandbox-guard/guard/guard/runner"
	"github.com/sandbox-guard/guard/manifest"
)

// Target resolves the real executable behind tool and heals it when it is
// missing or broken: a build recipe rebuilds it, a Debian package reinstalls
// it. It returns the path, or a non-zero exit status after telling the
// person why (127: missing and cannot be healed).
func (c *Config) Target(ctx context.Context, tool *manifest.Tool) (string, int) {
	path, err := c.resolve(tool)
	if err == nil {
		health := c.checkBinary(path)
		if health == "" {
			return path, 0
		}
		err = errors.New(path + ": " + health)
	}
	if healErr := c.healBinary(ctx, tool, err); healErr != nil {
		c.Say("%s: %s", tool.Name, withHint(healErr))
		if ie, ok := interrupted(healErr); ok {
			return "", ie.Status()
		}
		return "", runner.StatusNotFound
	}
	path, err = c.resolve(tool)
	if err == nil {
		if health := c.checkBinary(path); health == "" {
			return path, 0
		} else {
			err = errors.New(path + ": still " + health + " after the heal")
		}
	}
	c.Say("%s: %v", tool.Name, err)
	return "", runner.StatusNotFound
}

func (c *Config) resolve(tool *manifest.Tool) (string, error) {
	self, haveSelf := resolve.IDOf("/proc/self/exe")
	return resolve.Real(resolve.Query{
		Name:     tool.Name,
		Path:     tool.Path,
		PathEnv:  os.Getenv("PATH"),
		ShimDir:  c.ShimDir,
		Self:     self,
		HaveSelf: haveSelf,
	})
}

// noHealHint is the last line when nothing can bring a tool back.
func noHealHint(tool *manifest.Tool) string {
	var b strings.Builder
	b.WriteString("no build recipe or package heals it; install it, or give [tools.")
	b.WriteString(tool.Name)
	b.WriteString("] a path, build or package in the manifest")
	return b.String()
}
