package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// StartError is a start command (RunSpec.Start) that failed: the run
// stops before its command, and nothing is collected.
type StartError struct {
	// Step is the command (its Label names it).
	Step sandbox.StartStep
	// ExitCode is its exit status (TimeoutExitCode when it ran past the
	// run's timeout); -1 when it did not run to an exit.
	ExitCode int
	// Err is why it did not run to an exit, if so.
	Err error
}

func (e *StartError) Error() string {
	what := fmt.Sprintf("the environment's %s (%s)", e.Step.Label(), startText(e.Step))
	switch {
	case e.Err != nil:
		return fmt.Sprintf("%s did not run: %v; the run stops before its command", what, e.Err)
	case e.ExitCode == sandbox.TimeoutExitCode:
		return fmt.Sprintf("%s ran longer than the run's timeout and was killed; the run stops before its command", what)
	}
	return fmt.Sprintf("%s exited with status %d; the run stops before its command", what, e.ExitCode)
}

func (e *StartError) Unwrap() error { return e.Err }

// startText is a start command as people read it: its argv, or its
// shell line, on one line with controls made visible (it is the
// project's text).
func startText(s sandbox.StartStep) string {
	if s.Argv != nil {
		return safetext.Line(strings.Join(s.Argv, " "))
	}
	return safetext.Line(s.Shell)
}

// hostsLines are the /etc/hosts lines of hosts, each entry checked again
// (sandbox.json is read back before a reply round) so that only one
// name and one address ever reach a line.
func hostsLines(hosts []sandbox.HostEntry) (string, error) {
	var b strings.Builder
	b.WriteString("\n# airlock: the environment's runArgs --add-host\n")
	for _, h := range hosts {
		if err := envspec.CheckHostEntry(envspec.HostEntry{Name: h.Name, IP: h.IP}); err != nil {
			return "", fmt.Errorf("/etc/hosts entry: %w", err)
		}
		b.WriteString(h.IP + " " + h.Name + "\n")
	}
	return b.String(), nil
}

// writeHosts appends RunSpec.Hosts to the guest's /etc/hosts as root,
// and puts the names that point at the VM's own loopback into the
// command's NO_PROXY, so that a client reaches them in the VM rather
// than asking the egress proxy (which resolves every name on the host,
// by its own rules: an entry never changes where the proxy connects,
// and the VM has no other way out).
func (r *runner) writeHosts(ctx context.Context, m Machine) error {
	if len(r.o.Hosts) == 0 {
		return nil
	}
	lines, err := hostsLines(r.o.Hosts)
	if err != nil {
		return err
	}
	var stderr headtail.Head
	stderr.Max = 4 << 10
	if err := m.Exec(ctx, "cat >> /etc/hosts", strings.NewReader(lines), nil, &stderr); err != nil {
		return fmt.Errorf("write the environment's --add-host entries to /etc/hosts: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var local []string
	for _, h := range r.o.Hosts {
		if ip, err := netip.ParseAddr(h.IP); err == nil && ip.IsLoopback() {
			local = append(local, h.Name)
		}
	}
	if len(local) > 0 && r.netEnv != nil {
		for _, k := range []string{"NO_PROXY", "no_proxy"} {
			if v, ok := r.netEnv[k]; ok {
				r.netEnv[k] = strings.Join(append([]string{v}, local...), ",")
			}
		}
	}
	entries := make([]string, len(r.o.Hosts))
	for i, h := range r.o.Hosts {
		entries[i] = h.IP + " " + h.Name
	}
	return r.sb.Audit(sandbox.Event{Event: sandbox.EventHosts, Data: map[string]any{"entries": entries}})
}

// startCommands runs RunSpec.Start one after the other, as the
// command's user in /workspace with its environment, in the agent's
// jail, their output live and in the transcript: each round starts with
// them, as a Dev Container's postStartCommand and postAttachCommand run
// each time it starts. The first that fails stops the run (StartError).
func (r *runner) startCommands(ctx context.Context, m Machine) error {
	if len(r.o.Start) == 0 {
		return nil
	}
	tf, err := os.OpenFile(r.sb.Path(sandbox.TranscriptFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open transcript: %w", err)
	}
	defer tf.Close()
	capped := headtail.New(tf, "transcript", TranscriptHead, TranscriptTail)
	defer capped.Close() // on an early return too: the tail is written
	// A start command left running (a server) writes here, and on the
	// terminal, only until the start commands are done: both are the
	// command's then.
	tr := &gateWriter{w: lockio.NewWriter(capped)}
	liveOut, liveErr := liveWriters(r.o.Stdout, r.o.Stderr)
	var failed error
	gates := []*gateWriter{tr}
	for _, s := range r.o.Start {
		// The transcript says what ran (live, the progress does).
		fmt.Fprintf(tr, "airlock: %s: %s\n", s.Label(), startText(s))
		out, errOut := &gateWriter{w: teeWriter(liveOut, tr)}, &gateWriter{w: teeWriter(liveErr, tr)}
		gates = append(gates, out, errOut)
		if failed = r.startCommand(ctx, m, s, out, errOut); failed != nil {
			break
		}
	}
	for _, g := range gates {
		g.close()
	}
	if err := r.closeCapped(capped, sandbox.TranscriptFile); err != nil && failed == nil {
		return err
	}
	return failed
}

// startCommand runs one start command (see startCommands).
func (r *runner) startCommand(ctx context.Context, m Machine, s sandbox.StartStep, stdout, stderr io.Writer) error {
	args := s.Argv
	if args == nil {
		args = []string{"sh", "-c", s.Shell}
	}
	if len(args) == 0 || args[0] == "" {
		return &StartError{Step: s, ExitCode: -1, Err: errors.New("no program to run")}
	}
	r.progress(Progress{Step: StepRun, Message: fmt.Sprintf("running the environment's %s: %s", s.Label(), startText(s))})
	runCtx, stop := r.timeLimited(ctx, m)
	t := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- m.Run(runCtx, client.Command{
			Args: args, Dir: sandbox.Workspace, Env: r.commandEnv(), User: r.user,
			Stdout: stdout, Stderr: stderr, Jail: r.jail(),
		})
	}()
	grace := cmp.Or(r.o.StartGrace, DefaultStartGrace)
	var err error
	select {
	case err = <-done:
		stop()
	case <-time.After(grace):
		// A start command that has not ended is a server (a dev server
		// is what postAttachCommand often starts): it goes on beside the
		// command, in the jail, until the VM stops or the run's time is
		// up, as a Dev Container's does beside the person working.
		go func() { <-done; stop() }()
		r.progress(Progress{Step: StepRun, Message: fmt.Sprintf("the environment's %s has not ended after %s: it goes on beside the command", s.Label(), grace)})
		fmt.Fprintf(stderr, "airlock: %s has not ended after %s: it goes on beside the command (its output from now on is not kept)\n", s.Label(), grace)
		return r.sb.Audit(sandbox.Event{Event: sandbox.EventStart, Data: startEvent(s, map[string]any{"running": true, "ms": time.Since(t).Milliseconds()})})
	}
	code := 0
	var exit *client.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case runCtx.Err() != nil && ctx.Err() == nil:
		code = sandbox.TimeoutExitCode
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", s.Label(), ctx.Err())
	default:
		return &StartError{Step: s, ExitCode: -1, Err: err}
	}
	ev := startEvent(s, map[string]any{"exit_code": code, "ms": time.Since(t).Milliseconds()})
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventStart, Data: ev}); err != nil {
		return err
	}
	if code != 0 {
		r.res.ExitCode = code
		return &StartError{Step: s, ExitCode: code}
	}
	return nil
}

// DefaultStartGrace is how long a start command is waited on before it
// is left running beside the command (RunSpec.StartGrace).
const DefaultStartGrace = 30 * time.Second

// startEvent is the audit's record of start command s, with more.
func startEvent(s sandbox.StartStep, more map[string]any) map[string]any {
	more["key"] = s.Label()
	if s.Argv != nil {
		more["argv"] = s.Argv
	} else {
		more["shell"] = s.Shell
	}
	return more
}

// gateWriter passes writes on until it is closed, then drops them: the
// output of a start command left running, once its round has moved on.
type gateWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gateWriter) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}
