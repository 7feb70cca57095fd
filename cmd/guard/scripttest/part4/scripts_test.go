// Package part4 runs part 4 of 4 of guard's testscripts (package scripttest).
package part4

import (
	"testing"

	"github.com/sandbox-guard/guard/cmd/guard/scripttest"
)

func TestMain(m *testing.M) { scripttest.Main(m) }

func TestScripts(t *testing.T) { scripttest.Run(t, 4, 4) }
