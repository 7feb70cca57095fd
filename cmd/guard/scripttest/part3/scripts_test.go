// Package part3 runs part 3 of 4 of guard's testscripts (package scripttest).
package part3

import (
	"testing"

	"github.com/sandbox-guard/guard/cmd/guard/scripttest"
)

func TestMain(m *testing.M) { scripttest.Main(m) }

func TestScripts(t *testing.T) { scripttest.Run(t, 3, 4) }
