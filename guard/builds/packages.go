package builds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sandbox-guard/guard/guard/heallog"
	"github.com/sandbox-guard/guard/guard/lock"
	"github.com/sandbox-guard/guard/guard/progress"
)

// euid is the user b runs as: os.Geteuid, or the one a test plays
// (SetEUID).
func (b *Builder) euid() int {
	if b.geteuid != nil {
		return b.geteuid()
	}
	return os.Geteuid()
}

// unknownPackage is what apt-get prints when its package lists are empty or
// stale (a fresh container): the cure is `apt-get update`.
var unknownPackage = []string{"Unable to locate package", "has no installation candidate", "is not available, but is referred to"}

// EnsureCommands installs the packages providing any of cmds that is not on
// PATH. A command the manifest's [packages] does not map is assumed to be
// provided by the package of the same name (cmake, git, curl).
func (b *Builder) EnsureCommands(ctx context.Context, tool string, cmds []string) error {
	if len(b.missingCommands(cmds)) == 0 {
		return nil
	}
	ctx, cancel := b.withHealTimeout(ctx)
	defer cancel()
	held, err := b.lockAPT(ctx, tool)
	if err != nil {
		return err
	}
	defer held.Release()
	missing := b.missingCommands(cmds) // another process may have installed them
	if len(missing) == 0 {
		return nil
	}
	var pkgs []string
	seen := map[string]bool{}
	for _, c := range missing {
		var p string
		if b.Package != nil {
			p = b.Package(c)
		}
		if p == "" {
			p = c
		}
		if !seen[p] {
			seen[p] = true
			pkgs = append(pkgs, p)
		}
	}
	if err := b.install(ctx, tool, pkgs, "missing command "+strings.Join(missing, ", ")); err != nil {
		return err
	}
	if still := b.missingCommands(cmds); len(still) > 0 {
		return fmt.Errorf("installed %s but %s is still not on PATH", strings.Join(pkgs, " "), strings.Join(still, ", "))
	}
	return nil
}

// InstallPackages installs pkgs with apt-get, as root or through `sudo -n`.
func (b *Builder) InstallPackages(ctx context.Context, tool string, pkgs []string) error {
	if len(pkgs) == 0 {
		return nil
	}
	ctx, cancel := b.withHealTimeout(ctx)
	defer cancel()
	held, err := b.lockAPT(ctx, tool)
	if err != nil {
		return err
	}
	defer held.Release()
	return b.install(ctx, tool, pkgs, "requested")
}

func (b *Builder) missingCommands(cmds []string) []string {
	var missing []string
	for _, c := range cmds {
		if _, ok := b.lookPath(c); !ok {
			missing = append(missing, c)
		}
	}
	return missing
}

func (b *Builder) withHealTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.HealTimeout > 0 {
		return context.WithTimeout(ctx, b.HealTimeout)
	}
	return context.WithCancel(ctx)
}

// lockAPT serialises installs: two apt-gets at once fail on dpkg's own lock.
func (b *Builder) lockAPT(ctx context.Context, tool string) (*lock.Held, error) {
	if b.StateDir == "" {
		return nil, errors.New("install packages: no state folder set")
	}
	held, err := lock.Acquire(ctx, b.layout().Lock("apt"), func() {
		fmt.Fprintln(b.stderr(), "guard: another process is installing packages; waiting")
		b.event(heallog.Event{Event: heallog.LockWait, Tool: tool, Target: "apt", Reason: "install"})
	})
	if err != nil {
		return nil, fmt.Errorf("wait for package install: %w", err)
	}
	return held, nil
}

// install runs apt-get install (apt-get update and one retry when the
// package is unknown) and logs package.install. The caller holds the lock.
func (b *Builder) install(ctx context.Context, tool string, pkgs []string, reason string) error {
	start := time.Now()
	err := b.aptInstall(ctx, pkgs)
	result, level := "ok", "info"
	if err != nil {
		result, level = "failed", "error"
		if errors.Is(err, context.DeadlineExceeded) {
			result = "timeout"
		}
	}
	b.event(heallog.Event{
		Level: level, Event: heallog.PackageInstall, Tool: tool, Target: strings.Join(pkgs, " "),
		Reason: reason, Result: result, DurationMS: time.Since(start).Milliseconds(),
	})
	return err
}

func (b *Builder) aptInstall(ctx context.Context, pkgs []string) error {
	list := strings.Join(pkgs, " ")
	hint := "sudo apt-get install -y " + list
	apt, ok := b.lookPath("apt-get")
	if !ok {
		return fmt.Errorf("cannot install %s: apt-get not found; install them with your system's package manager", list)
	}
	var prefix []string
	if b.euid() != 0 {
		sudo, ok := b.lookPath("sudo")
		if !ok {
			return fmt.Errorf("cannot install %s: not root and sudo is not available; run: %s", list, hint)
		}
		// sudo resets the environment; pass the frontend as an argument.
		prefix = []string{sudo, "-n", "DEBIAN_FRONTEND=noninteractive"}
	}
	env := append(b.baseEnv(), "DEBIAN_FRONTEND=noninteractive")
	installArgv := append(append(append([]string(nil), prefix...), apt, "install", "-y", "--no-install-recommends"), pkgs...)
	updateArgv := append(append([]string(nil), prefix...), apt, "update")

	logPath := b.LogPath("apt")
	logf, err := openLog(logPath)
	if err != nil {
		return fmt.Errorf("install %s: %w", list, err)
	}
	defer logf.Close()
	fmt.Fprintf(b.stderr(), "guard: installing %s; log: %s\n", list, logPath)
	fmt.Fprintf(logf, "== guard: install %s at %s\n", list, time.Now().Format(time.RFC3339))
	rep := progress.Start(b.stderr(), "installing "+list, 0, b.Pace)
	out := &tailWriter{w: logf}

	runLogged := func(argv []string, label string) (string, error) {
		var buf bytes.Buffer
		out.SetPrefix(label, rep)
		fmt.Fprintf(logf, "$ %s\n", QuoteArgv(argv))
		err := b.run(ctx, argv, "/", env, io.MultiWriter(out, &limitedBuffer{buf: &buf, max: 64 << 10}), nil)
		return buf.String(), err
	}
	text, err := runLogged(installArgv, "apt-get install")
	if err != nil && ctx.Err() == nil && containsAny(text, unknownPackage) {
		if _, uerr := runLogged(updateArgv, "apt-get update"); uerr == nil {
			_, err = runLogged(installArgv, "apt-get install")
		}
	}
	if err != nil {
		rep.Stop("")
		e := b.stepError(ctx, 1, installArgv, err)
		e.Name, e.Steps, e.Last, e.Log = "install "+list, 1, out.Last(), logPath
		msg := fmt.Sprintf("install %s: %s %s", list, QuoteArgv(installArgv), e.what())
		if e.Last != "" {
			msg += fmt.Sprintf(" (%s)", clip(e.Last, 200))
		}
		fmt.Fprintf(logf, "== guard: %s\n", msg)
		return &wrapped{msg: fmt.Sprintf("%s; see %s; or run: %s", msg, logPath, hint), err: errOrCtx(ctx, err)}
	}
	rep.Stop("guard: installed " + list)
	return nil
}

func errOrCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// limitedBuffer keeps the first max bytes of a command's output for
// matching apt-get's messages.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// wrapped is an error whose message already says everything a person needs,
// while errors.Is still reaches the cause (a timeout).
type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
