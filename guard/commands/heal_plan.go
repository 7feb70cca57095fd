package commands

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard"
	"github.com/sandbox-guard/guard/guard/builds"
	"github.com/sandbox-guard/guard/guard/stash"
	"github.com/sandbox-guard/guard/manifest"
)

// A heal's plan is read from the same report status prints, so the two
// always agree on what needs doing: a job per build recipe or package
// (run once, however many tools it brings back), and one per model.

// job is one thing a heal does.
type job struct {
	kind  jobKind
	name  string   // the recipe, package or model file; the tool for "none"
	tools []string // the tools a build or package brings back, in order
	bytes int64    // to download or hash
	clone string   // the repo a build clones first (its dir is missing)
	last  time.Duration
	built bool // the recipe ran to a good end here before; last is its time
	// stashed: a stash entry matches the recipe now, so the heal restores
	// it in about a second instead of building (docs/stash.md).
	stashed bool
	// from: a source of the recipe's stash_from holds an entry for its key
	// now (a dry run asks, see askSources): the heal restores from it.
	from string
}

// plan lists the jobs that bring back what r finds wrong or never fetched,
// among the tools and models want accepts.
func plan(c *guard.Config, r *Report, want func(string) bool) []*job {
	var jobs []*job
	byKey := map[string]*job{}
	for _, t := range r.Tools {
		if t.State == StateOK || t.Fix != "" || !want(t.Name) {
			continue // a Fix is the person's to run: no job of a heal's
		}
		j := toolJob(c, c.M.Tools[t.Name])
		for _, b := range r.Builds {
			j.stashed = j.stashed || j.kind == jobBuild && b.Name == j.name && b.Stash.Matches
		}
		if have := byKey[string(j.kind)+":"+j.name]; have != nil {
			have.tools = append(have.tools, t.Name)
			continue
		}
		byKey[string(j.kind)+":"+j.name] = j
		jobs = append(jobs, j)
	}
	for _, m := range r.Models {
		if modelUsable(m.State) || m.Fix != "" || !want(m.File) {
			continue
		}
		j := &job{kind: jobDownload, name: m.File, bytes: m.DownloadBytes}
		if m.State == StateStale {
			j.kind, j.bytes = jobVerify, m.Size
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// toolJob is what brings tool back: its build recipe, else its package.
func toolJob(c *guard.Config, tool *manifest.Tool) *job {
	j := &job{kind: jobNone, name: tool.Name, tools: []string{tool.Name}}
	switch rec := c.M.Builds[tool.Build]; {
	case rec != nil:
		j.kind, j.name = jobBuild, rec.Name
		if _, err := os.Stat(rec.Dir); err != nil && rec.Repo != "" {
			j.clone = rec.Repo
		}
		if last, ok := builds.LastBuild(c.StateDir, rec.Name); ok {
			j.last, j.built = last.Took, true
		}
	case tool.Package != "":
		j.kind, j.name = jobPackage, tool.Package
	}
	return j
}

// plannedSteps are the steps each build job runs, as the builder will run
// them (manifest.Build.ExpandedSteps).
func plannedSteps(c *guard.Config, jobs []*job) map[string][][]string {
	var steps map[string][][]string
	for _, j := range jobs {
		if rec := c.M.Builds[j.name]; j.kind == jobBuild && rec != nil {
			if steps == nil {
				steps = map[string][][]string{}
			}
			steps[j.name] = rec.ExpandedSteps()
		}
	}
	return steps
}

// cost says what a build will cost as far as guard knows: its last good
// run here, and the clone it needs first.
func (j *job) cost() string {
	var parts []string
	switch {
	case j.stashed:
		parts = append(parts, "a stash entry matches: restored, not built")
	case j.from != "":
		parts = append(parts, "an entry of "+printable(j.from)+" matches: restored from it, not built")
	}
	if j.clone != "" {
		parts = append(parts, "clone "+printable(j.clone)+" first")
	}
	switch {
	case j.built:
		parts = append(parts, "last took "+took(j.last))
	case !j.stashed && j.from == "":
		parts = append(parts, "never built here")
	}
	return strings.Join(parts, "; ")
}

// sourceTimeout bounds a dry run's question to one stash_from source: a
// source that is down or slow costs the dry run this, once.
const sourceTimeout = 5 * time.Second

// askSources is a dry run's look at the stash_from sources of each build
// job no local entry answers: one request a source (a registry's manifest
// for the key's tag, a folder's or URL's index), in order, until one holds
// an entry for the recipe's key now. A heal would restore from it; the dry
// run says so instead of "never built here". Only a dry run asks: a heal
// learns it by restoring, and its plan line names no source.
func askSources(ctx context.Context, e *guard.Engine, jobs []*job) {
	c := e.Config()
	for _, j := range jobs {
		rec := c.M.Builds[j.name]
		if j.kind != jobBuild || j.stashed || rec == nil || len(rec.StashFrom) == 0 || j.clone != "" {
			continue
		}
		key, err := e.StashKey(ctx, rec)
		if err != nil {
			continue
		}
		for _, src := range rec.StashFrom {
			sctx, cancel := context.WithTimeout(ctx, sourceTimeout)
			ok, err := e.Stash().Holds(sctx, src, rec.Name, key.Sum)
			cancel()
			if err == nil && ok {
				j.from = stash.Redact(src)
				break
			}
		}
	}
}

// what says what the job does, for the plan line and the dry run.
func (j *job) what() string {
	switch j.kind {
	case jobBuild:
		return "build " + printable(j.name) + " (" + j.cost() + ")"
	case jobPackage:
		return "install package " + printable(j.name)
	case jobDownload:
		return "download " + humanBytes(j.bytes)
	case jobVerify:
		return "verify (hash " + humanBytes(j.bytes) + ")"
	}
	return ""
}

// again is what a dry run says of the second and later tools of a build
// or package job: the job is not run again for them.
func (j *job) again() string {
	if j.kind == jobPackage {
		return "the same install of package " + printable(j.name)
	}
	return "the same build of " + printable(j.name)
}

// planLine is the plan in one line, said before a heal starts: "build
// llama-cpp for llama-completion, llama-simple (last took 14m2s), download
// a.gguf (1.1 GiB)". It is "" when there is nothing to do.
func planLine(jobs []*job) string {
	var parts []string
	for _, j := range jobs {
		switch j.kind {
		case jobBuild:
			parts = append(parts, "build "+printable(j.name)+" for "+printableList(j.tools)+" ("+j.cost()+")")
		case jobPackage:
			parts = append(parts, "install package "+printable(j.name)+" for "+printableList(j.tools))
		case jobDownload, jobVerify:
			parts = append(parts, string(j.kind)+" "+printable(j.name)+" ("+humanBytes(j.bytes)+")")
		}
	}
	return strings.Join(parts, ", ")
}

// planTotal sums the plan up for a dry run: "1 build (last took 1.7s),
// 4.0 KiB to download".
func planTotal(jobs []*job) string {
	var builds, pkgs, verify int
	var download, hash int64
	var costs []string
	for _, j := range jobs {
		switch j.kind {
		case jobBuild:
			builds++
			switch {
			case j.from != "":
				costs = append(costs, "restored from "+printable(j.from))
			case j.built:
				costs = append(costs, "last took "+took(j.last))
			case j.stashed:
				costs = append(costs, "restored from the stash")
			default:
				costs = append(costs, "never built here")
			}
		case jobPackage:
			pkgs++
		case jobDownload:
			download += j.bytes
		case jobVerify:
			verify++
			hash += j.bytes
		}
	}
	var parts []string
	if builds > 0 {
		parts = append(parts, fmt.Sprintf("%d %s (%s)", builds, plural(builds, "build", "builds"), strings.Join(costs, ", ")))
	}
	if pkgs > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", pkgs, plural(pkgs, "package", "packages")))
	}
	if download > 0 {
		parts = append(parts, humanBytes(download)+" to download")
	}
	if verify > 0 {
		parts = append(parts, humanBytes(hash)+" to hash")
	}
	if len(parts) == 0 {
		return "nothing to do"
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func printableList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = printable(n)
	}
	return strings.Join(out, ", ")
}
