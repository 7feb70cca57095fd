package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/manifest"
)

// AskOptions are `guard ask` flags.
type AskOptions struct {
	JSON   bool
	Role   string
	Prompt []string
}

// Answer is one role's result; --json prints one per line.
type Answer struct {
	Role     string  `json:"role"`
	Model    string  `json:"model"`
	Attempts int     `json:"attempts"`
	Seconds  float64 `json:"seconds"`
	Cached   bool    `json:"cached"`
	Exit     int     `json:"exit"`
	Text     string  `json:"text"`
}

// Ask is `guard ask`: a short casual prompt goes to SCOUT alone; anything
// else to every swarm role at once, each with its own budget and timeout
// fallback, through the same heal, cache and runner path as the shims. A
// role prints as soon as it is done, so a slow role never holds back a fast
// one. Exit 0 when at least one role answered, 2 when none did.
func Ask(ctx context.Context, e *guard.Engine, out io.Writer, o AskOptions) int {
	c := e.Config()
	prompt := strings.TrimSpace(strings.Join(o.Prompt, " "))
	if prompt == "" {
		e.Say("ask needs a prompt: guard ask \"why is the sky blue?\"")
		return 2
	}
	if len(c.M.Swarm.Roles) == 0 {
		e.Say("ask: %s has no [swarm]; add one naming a model role for each swarm role, such as:\n[swarm]\nroles = { SCOUT = %q }", c.M.Source, exampleRole(c.M))
		return 2
	}
	roles, n := swarmRoles(c.M, prompt, o.Role)
	if len(roles) == 0 {
		e.Say("ask: no swarm role %q in the manifest's [swarm] roles; it has %s", o.Role, strings.Join(sortedKeys(c.M.Swarm.Roles), ", "))
		return 2
	}
	tool := c.M.Tool("llama-completion")
	if tool == nil {
		tool = &manifest.Tool{Name: "llama-completion"}
	}
	var mu sync.Mutex
	answered := false
	var wg sync.WaitGroup
	for _, role := range roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := askRole(ctx, e, tool, role, prompt, n)
			mu.Lock()
			defer mu.Unlock()
			answered = answered || a.Exit == 0
			if o.JSON {
				b, _ := json.Marshal(a)
				fmt.Fprintf(out, "%s\n", b)
				return
			}
			state := fmt.Sprintf("%s, %.1fs", a.Model, a.Seconds)
			if a.Cached {
				state += ", cached"
			}
			if a.Exit != 0 {
				state += ", failed with exit " + strconv.Itoa(a.Exit)
			}
			fmt.Fprintf(out, "== %s (%s)\n%s\n", a.Role, state, strings.TrimRight(a.Text, "\n"))
		}()
	}
	wg.Wait()
	if !answered {
		return 2
	}
	return 0
}

// exampleRole is a model role to show in a [swarm] example: the first
// model's that has one, else a placeholder.
func exampleRole(m *manifest.Manifest) string {
	for _, md := range m.Models {
		if md.Role != "" {
			return md.Role
		}
	}
	return "ROLE (a [[models]] entry's role)"
}

// swarmRoles picks the roles to ask and the answer length: light mode (SCOUT
// alone, light_tokens: a casual question needs a line, not an essay) for a
// prompt of fewer than light_words words with no code in it; otherwise
// every role, full_tokens.
func swarmRoles(m *manifest.Manifest, prompt, only string) ([]string, int) {
	if only != "" {
		if _, ok := m.Swarm.Roles[only]; !ok {
			return nil, 0
		}
		return []string{only}, m.Swarm.FullTokens
	}
	if isLight(prompt, m.Swarm.LightWords) {
		if _, ok := m.Swarm.Roles["SCOUT"]; ok {
			return []string{"SCOUT"}, m.Swarm.LightTokens
		}
	}
	return sortedKeys(m.Swarm.Roles), m.Swarm.FullTokens
}

// isLight says whether a prompt is short and casual: under limit words and
// nothing that looks like code.
func isLight(prompt string, limit int) bool {
	if strings.ContainsAny(prompt, "`{};=<>\n") {
		return false
	}
	for _, w := range []string{"func ", "def ", "class ", "import ", "#include", "SELECT "} {
		if strings.Contains(prompt, w) {
			return false
		}
	}
	return len(strings.Fields(prompt)) < limit
}

func askRole(ctx context.Context, e *guard.Engine, tool *manifest.Tool, role, prompt string, n int) Answer {
	c := e.Config()
	a := Answer{Role: role, Exit: 2}
	m := c.M.ModelByRole(c.M.Swarm.Roles[role])
	if m == nil {
		a.Text = "no model has role " + c.M.Swarm.Roles[role]
		return a
	}
	a.Model = m.File
	var text strings.Builder
	o := &guard.LlamaIO{W: &text, Budget: c.M.Swarm.Timeouts[role].D(), NoDirect: true}
	start := time.Now()
	args := []string{"-m", c.M.ModelsPath(m.File), "-p", prompt, "-n", strconv.Itoa(n)}
	a.Exit = e.Llama(ctx, tool, args, o)
	a.Seconds = time.Since(start).Seconds()
	a.Attempts, a.Cached, a.Text = o.Attempts, o.Cached, text.String()
	if o.Model != "" {
		a.Model = o.Model
	}
	return a
}
