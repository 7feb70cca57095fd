// Package part1 runs part 1 of 4 of guard's testscripts (package scripttest).
package part1

import (
	"testing"

	"github.com/sandbox-guard/guard/cmd/guard/scripttest"
)

func TestMain(m *testing.M) { scripttest.Main(m) }

func TestScripts(t *testing.T) { scripttest.Run(t, 1, 4) }
