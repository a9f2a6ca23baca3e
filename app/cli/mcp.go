package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/machine/vmhost"
	"github.com/airlock-dev/airlock/app/mcpserver"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

func newMCPCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve Airlock's sandboxes to an agent on this machine over MCP (stdio)",
		Long: `mcp is a Model Context Protocol server on standard input and output, for
an agent that runs on the host and wants a VM for the risky part of its work.
Its tools: sandbox_open (a sandbox on a copy of a project, its VM kept
running), sandbox_exec (a shell command in /workspace, with no network; the
exit code and output come back, the output is kept in the sandbox's
transcript), sandbox_read and sandbox_write (files of /workspace),
sandbox_diff (what the changes mean, their flags, the patch) and
sandbox_submit (the agent's summary kept, the VM stopped, the sandbox left
for your review). There is no tool that applies: you review and apply with
airlock diff, airlock apply or the app, as for any sandbox.

An MCP client may open only the projects that [mcp] projects in config.toml
allows (nothing by default):

  [mcp]
  projects = ["~/src/*"]

Add it to Claude Code with: claude mcp add airlock -- airlock mcp`,
		Example: `  claude mcp add airlock -- airlock mcp`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := newMCPService(e)
			if err != nil {
				return err
			}
			in, ok := e.stdin.(io.ReadCloser)
			if !ok {
				in = io.NopCloser(e.stdin)
			}
			t := &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{e.stdout}}
			err = mcpserver.New(svc, Version).Run(cmd.Context(), t)
			if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// mcpService is airlock mcp's mcpserver.Service: every sandbox it makes
// is planned by the planner and run by the executor like any other; the
// tools reach only the sandboxes an MCP client opened.
type mcpService struct {
	e     *env
	store *sandbox.Store
	errw  *lockio.Writer
}

var _ mcpserver.Service = (*mcpService)(nil)

func newMCPService(e *env) (*mcpService, error) {
	store, err := e.sandboxes()
	if err != nil {
		return nil, err
	}
	return &mcpService{e: e, store: store, errw: lockio.NewWriter(e.stderr)}, nil
}

func (s *mcpService) Open(ctx context.Context, in mcpserver.OpenInput) (mcpserver.Opened, error) {
	var o mcpserver.Opened
	path, err := config.UserPath(os.Getenv)
	if err != nil {
		return o, err
	}
	user, err := config.LoadUser(path)
	if err != nil {
		return o, err
	}
	userHome, _ := os.UserHomeDir()
	project, err := user.MCP.AllowProject(in.Project, userHome)
	if err != nil {
		return o, err
	}
	pl, err := s.e.openPlanner(s.errw)
	if err != nil {
		return o, err
	}
	pn, err := pl.Run(ctx, plan.Request{Project: project, Image: in.Image, Command: []string{"true"}, Keep: true, NoVerify: true,
		Origin: &sandbox.Origin{MCP: "sandbox_open"}})
	if err != nil {
		return o, err
	}
	defer pn.Close()
	done, err := pipeline.Execute(ctx, s.store, pn.Job)
	res := done.Result()
	if err != nil {
		if res != nil {
			return o, fmt.Errorf("%w (sandbox %s is kept: airlock rm %s removes it)", err, res.Sandbox.ID, res.Sandbox.ID)
		}
		return o, err
	}
	o = mcpserver.Opened{ID: res.Sandbox.ID, Project: project, Image: res.Meta.Image}
	if base, err := res.Sandbox.ReadManifest(sandbox.BaselineFile, true); err == nil {
		for _, en := range base.Entries {
			if en.Type == manifest.File {
				o.Files++
			}
		}
	}
	fmt.Fprintf(s.errw, "airlock mcp: opened sandbox %s on %s\n", o.ID, project)
	return o, nil
}

// kept is the sandbox id names, which an MCP client must have opened,
// and the plan that reaches its kept VM.
func (s *mcpService) kept(ctx context.Context, id string) (*sandbox.Sandbox, *plan.ExecPlan, error) {
	if id == "" {
		return nil, nil, errors.New("id: give the id sandbox_open returned")
	}
	sb, err := s.store.Get(id)
	if err != nil {
		return nil, nil, err
	}
	m, err := sb.Meta()
	if err != nil {
		return nil, nil, err
	}
	if m.Origin == nil || m.Origin.MCP == "" {
		return nil, nil, fmt.Errorf("sandbox %s was not opened over MCP: its tools reach only the sandboxes sandbox_open made", sb.ID)
	}
	if m.Origin.Submitted {
		return nil, nil, fmt.Errorf("sandbox %s was submitted for review: open another with sandbox_open", sb.ID)
	}
	pl, err := s.e.openPlanner(s.errw)
	if err != nil {
		return nil, nil, err
	}
	pn, err := pl.Exec(ctx, plan.ExecRequest{Sandbox: sb.ID})
	if err != nil {
		return nil, nil, err
	}
	return sb, pn, nil
}

// attach connects to the kept VM of sb.
func (s *mcpService) attach(ctx context.Context, sb *sandbox.Sandbox, pn *plan.ExecPlan) (*launch.Guest, error) {
	g, err := launch.Attach(ctx, pn.Launch)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: its VM is not running (it stops when idle, and after sandbox_submit): open another with sandbox_open: %w", sb.ID, err)
	}
	if g.Image == nil {
		g.Image = pn.Image
	}
	return g, nil
}

// Caps on what one sandbox_exec keeps in the transcript.
const mcpTranscriptHead, mcpTranscriptTail = 4 << 20, 4 << 20

func (s *mcpService) Exec(ctx context.Context, id, command string, timeout time.Duration) (mcpserver.ExecOutput, error) {
	var out mcpserver.ExecOutput
	sb, pn, err := s.kept(ctx, id)
	if err != nil {
		return out, err
	}
	g, err := s.attach(ctx, sb, pn)
	if err != nil {
		return out, err
	}
	defer g.Client.Close()
	tf, err := os.OpenFile(sb.Path(sandbox.TranscriptFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return out, err
	}
	defer tf.Close()
	fmt.Fprintf(tf, "\n$ %s    [airlock mcp sandbox_exec]\n", safetext.Line(command))
	transcript := headtail.New(tf, "output", mcpTranscriptHead, mcpTranscriptTail)
	var shown bytes.Buffer
	result := headtail.New(&shown, "output", mcpserver.MaxOutput/4, mcpserver.MaxOutput*3/4)
	w := lockio.NewWriter(io.MultiWriter(transcript, result))
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	runErr := g.Client.Run(runCtx, client.Command{Args: []string{"sh", "-c", command}, Dir: sandbox.Workspace, User: g.Image.User(), Stdout: w, Stderr: w})
	var exit *client.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exit):
		out.ExitCode = exit.ExitCode()
	case runCtx.Err() != nil && ctx.Err() == nil:
		out.ExitCode, out.TimedOut = 124, true
	default:
		return out, fmt.Errorf("run in sandbox %s: %w", sb.ID, runErr)
	}
	_, _ = transcript.Close()
	st, _ := result.Close()
	fmt.Fprintf(tf, "[exit %d]\n", out.ExitCode)
	out.Output, out.Truncated = shown.String(), st.Capped()
	return out, sb.Audit(sandbox.Event{Event: sandbox.EventExec, Data: map[string]any{
		"mcp": "sandbox_exec", "command": command, "exit_code": out.ExitCode, "timed_out": out.TimedOut}})
}

// readScript prints a workspace file's size on a line, then its first
// $2 bytes, refusing a path with a symbolic link in it or that is not a
// regular file. It runs as the command's user, in /workspace.
const readScript = `set -euf
p=$1; d=.; IFS=/
for e in $p; do d=$d/$e; if [ -L "$d" ]; then echo "${d#./} is a symbolic link" >&2; exit 3; fi; done
[ -e "$p" ] || { echo "$p does not exist" >&2; exit 4; }
[ -f "$p" ] || { echo "$p is not a regular file" >&2; exit 4; }
wc -c < "$p"; head -c "$2" -- "$p"`

// writeScript replaces a workspace file with its standard input (making
// its folders), refusing a path with a symbolic link in it or that names
// anything but a regular file.
const writeScript = `set -euf
p=$1; d=.; IFS=/
for e in $p; do d=$d/$e; if [ -L "$d" ]; then echo "${d#./} is a symbolic link" >&2; exit 3; fi; done
if [ -e "$p" ] && [ ! -f "$p" ]; then echo "$p is not a regular file" >&2; exit 4; fi
case "$p" in */*) mkdir -p -- "${p%/*}";; esac
cat > "$p"`

func (s *mcpService) Read(ctx context.Context, id, rel string) ([]byte, int64, error) {
	var stdout bytes.Buffer
	if err := s.guestScript(ctx, id, readScript, []string{rel, strconv.Itoa(mcpserver.MaxRead)}, nil, &stdout); err != nil {
		return nil, 0, err
	}
	line, rest, ok := bytes.Cut(stdout.Bytes(), []byte("\n"))
	size, err := strconv.ParseInt(strings.TrimSpace(string(line)), 10, 64)
	if !ok || err != nil || size < 0 || int64(len(rest)) > min(size, mcpserver.MaxRead) {
		return nil, 0, fmt.Errorf("read %s: the guest's answer does not add up", rel)
	}
	return rest, size, nil
}

func (s *mcpService) Write(ctx context.Context, id, rel string, content []byte) error {
	if err := s.guestScript(ctx, id, writeScript, []string{rel}, bytes.NewReader(content), io.Discard); err != nil {
		return err
	}
	sb, err := s.store.Get(id)
	if err != nil {
		return err
	}
	return sb.Audit(sandbox.Event{Event: sandbox.EventWrite, Data: map[string]any{"mcp": "sandbox_write", "path": rel, "bytes": len(content)}})
}

// guestScript runs script with args in the kept VM of sandbox id, as its
// command's user in /workspace; stdout is capped by the script itself,
// and a refusal comes back as its first line of stderr.
func (s *mcpService) guestScript(ctx context.Context, id, script string, args []string, stdin io.Reader, stdout io.Writer) error {
	sb, pn, err := s.kept(ctx, id)
	if err != nil {
		return err
	}
	g, err := s.attach(ctx, sb, pn)
	if err != nil {
		return err
	}
	defer g.Client.Close()
	stderr := &headtail.Head{Max: 4 << 10}
	limited := &capWriter{w: stdout, max: mcpserver.MaxRead + 64}
	err = g.Client.Run(ctx, client.Command{Args: append([]string{"sh", "-c", script, "sh"}, args...), Dir: sandbox.Workspace,
		User: g.Image.User(), Stdin: stdin, Stdout: limited, Stderr: stderr})
	var exit *client.ExitError
	if errors.As(err, &exit) {
		msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return fmt.Errorf("%s: %s", args[0], safetext.Line(msg))
	}
	return err
}

// capWriter passes on at most max bytes and drops the rest.
type capWriter struct {
	w   io.Writer
	max int
	n   int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if room := c.max - c.n; room < len(p) {
		if room > 0 {
			c.w.Write(p[:room])
		}
		c.n = c.max
		return len(p), nil
	}
	c.n += len(p)
	return c.w.Write(p)
}

// collect makes what the kept VM of sb now holds the sandbox's changes.
func (s *mcpService) collect(ctx context.Context, sb *sandbox.Sandbox, pn *plan.ExecPlan, cause string) error {
	m, err := sb.Meta()
	if err != nil {
		return err
	}
	proj, err := config.Load(m.Project)
	if err != nil {
		return err
	}
	_, err = pipeline.Collect(ctx, s.store, sb, pipeline.CollectOptions{Launch: pn.Launch, Limits: plan.ManifestLimits(pn.Limits),
		Excludes: proj.Exclude, Cause: cause})
	return err
}

func (s *mcpService) Diff(ctx context.Context, id string) (mcpserver.DiffOutput, error) {
	var d mcpserver.DiffOutput
	sb, pn, err := s.kept(ctx, id)
	if err != nil {
		return d, err
	}
	if err := s.collect(ctx, sb, pn, "mcp sandbox_diff"); err != nil {
		return d, err
	}
	cs, err := sb.Changeset(ctx)
	if err != nil {
		return d, err
	}
	if err := cs.Summarize(ctx); err != nil {
		return d, err
	}
	d.Overview = cs.Overview()
	for _, f := range cs.Files {
		df := mcpserver.DiffFile{Path: safetext.Line(f.Path), Status: string(f.Status), Added: f.Added, Removed: f.Removed}
		for _, fl := range f.Flags {
			df.Flags = append(df.Flags, fl.Reason)
		}
		d.Files = append(d.Files, df)
	}
	patch, _ := review.Patch(cs, review.ApproveAll(cs), review.PatchOptions{})
	d.Patch = string(patch)
	return d, nil
}

func (s *mcpService) Submit(ctx context.Context, id, summary string) (mcpserver.SubmitOutput, error) {
	var out mcpserver.SubmitOutput
	sb, pn, err := s.kept(ctx, id)
	if err != nil {
		return out, err
	}
	if err := s.collect(ctx, sb, pn, "mcp sandbox_submit"); err != nil {
		return out, err
	}
	if err := atomicfile.WriteFile(sb.Path(sandbox.SummaryFile), []byte(summary), 0o600); err != nil {
		return out, err
	}
	h, err := s.e.home()
	if err != nil {
		return out, err
	}
	if _, err := stopVM(ctx, h, sb.ID, vmhost.DefaultStopTimeout, false); err != nil {
		return out, err
	}
	m, err := sb.Update(func(m *sandbox.Meta) { m.Origin.Submitted = true })
	if err != nil {
		return out, err
	}
	out = mcpserver.SubmitOutput{ID: sb.ID, Review: "airlock diff " + sb.ID + ", then airlock apply " + sb.ID + ", or the app"}
	if m.Changes != nil {
		out.Files = m.Changes.Files
	}
	fmt.Fprintf(s.errw, "airlock mcp: sandbox %s submitted for review (%d files)\n", sb.ID, out.Files)
	return out, sb.Audit(sandbox.Event{Event: sandbox.EventSubmitted, Data: map[string]any{"mcp": "sandbox_submit", "summary_bytes": len(summary), "files": out.Files}})
}
