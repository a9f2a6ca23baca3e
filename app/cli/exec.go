package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/vm"
)

// bootFlags are the flags of every command that boots a VM.
type bootFlags struct {
	image       string
	arch        string
	cpus        int
	memory      memoryFlag
	link        string
	bootTimeout time.Duration
	openNetwork bool
	cold        bool
}

func (f *bootFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.image, "image", "minimal", "guest image to boot (see airlock image ls)")
	fl.StringVar(&f.arch, "arch", "", "guest architecture, amd64 or arm64 (default: the host's)")
	d := config.DefaultLimits()
	fl.IntVar(&f.cpus, "cpus", 0, fmt.Sprintf("virtual CPUs, at most the host's (default: [limits] cpus, %d)", d.CPUs))
	fl.Var(&f.memory, "memory", "guest memory, e.g. 2G or 512M; a bare number is MiB (default: [limits] memory, "+d.Memory.String()+")")
	fl.BoolVar(&f.openNetwork, "open-network", false, "give the VM an unprotected network device (NAT): no proxy, no allow-list, no request log")
	fl.StringVar(&f.link, "link", "", "guest link: vsock or serial (default: vsock where the host has it)")
	fl.DurationVar(&f.bootTimeout, "boot-timeout", launch.DefaultBootTimeout, "give up when the guest has not answered after this long")
	fl.BoolVar(&f.cold, "cold", false, "boot the VM cold instead of restoring the image's warm snapshot (the first boot of an image and machine size saves one)")
}

type execFlags struct {
	bootFlags
	netFlags
	interactive bool
	tty         bool
	env         []string
	workdir     string
	limits      limitFlags
}

// execResult is what `airlock exec --json` prints.
type execResult struct {
	ExitCode int    `json:"exit_code"`
	Signal   string `json:"signal,omitempty"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	BootMS   int64  `json:"boot_ms"`
	// Warm says the VM was restored from the image's warm snapshot.
	Warm   bool   `json:"warm"`
	RunMS  int64  `json:"run_ms"`
	Kernel string `json:"kernel"`
	Link   string `json:"link"`
	// Network is "open" when the VM had an unprotected network device.
	Network string `json:"network"`
}

func newExecCmd(e *env) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [ID] [flags] -- COMMAND [ARG...]",
		Short: "Boot a fresh VM, run one command in it, and tear it down; or run one in a kept sandbox's VM",
		Long: `exec boots a fresh VM from a guest image, runs COMMAND in it with live
output, and tears the VM down. The VM is restored from the image's warm
snapshot when there is a current one (the first boot saves it); --cold
boots it instead.

With a sandbox ID before --, COMMAND runs in that sandbox's VM, which must
still run (airlock run --keep), in /workspace unless -w says otherwise; the
VM keeps running afterwards. Boot, limit and network flags do not apply
there, and the VM has no network proxy after its run. airlock exits with the command's exit code
(128+N when a signal N killed it, 127 when the command was not found), or 125
when Airlock itself failed.

With --json the command's output is collected and printed as one JSON object
with its exit code and timings.`,
		Example: `  airlock exec -- uname -a
  airlock exec --arch arm64 -- cat /proc/cpuinfo
  echo hi | airlock exec -i -- tr a-z A-Z
  airlock exec -t -- sh
  airlock exec 3f2a -- ls /workspace`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch cmd.ArgsLenAtDash() {
			case -1, 0:
				return runExec(cmd.Context(), e, &f, "", args)
			case 1:
				if len(args) < 2 {
					return errors.New("exec ID: no command after --")
				}
				return runExec(cmd.Context(), e, &f, args[0], args[1:])
			}
			return errors.New("exec takes at most one sandbox ID before --")
		},
	}
	f.bootFlags.register(cmd)
	fl := cmd.Flags()
	fl.BoolVarP(&f.interactive, "interactive", "i", false, "pass standard input to the command")
	fl.BoolVarP(&f.tty, "tty", "t", false, "run the command on a terminal (implies -i)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable, NAME=VALUE (repeatable)")
	fl.StringVarP(&f.workdir, "workdir", "w", "", "working directory in the guest")
	f.limits.registerTimeout(fl, "kill the command after this long")
	f.netFlags.register(cmd)
	return cmd
}

func runExec(ctx context.Context, e *env, f *execFlags, sandboxID string, args []string) error {
	envMap, err := parseEnv(f.env)
	if err != nil {
		return err
	}
	if f.tty && e.json {
		return errors.New("--tty and --json do not go together: a terminal session has no separate output to collect")
	}
	errw := lockio.NewWriter(e.stderr)
	pl, err := e.openPlanner(errw)
	if err != nil {
		return err
	}
	pn, err := pl.Exec(ctx, plan.ExecRequest{
		Sandbox: sandboxID, Image: f.image, Arch: f.arch, Env: envMap, Limits: f.limits.request(&f.bootFlags),
		OpenNetwork: f.openNetwork, Allow: f.allow, Link: vm.LinkKind(f.link), BootTimeout: f.bootTimeout, Cold: f.cold,
	})
	if err != nil {
		return err
	}
	if pn.Sandbox != nil {
		return runExecIn(ctx, e, f, pn, args)
	}
	if pn.OpenNetwork {
		e.warnOpenNetwork()
	}
	p := e.newProgress()
	o := pn.Launch
	o.Progress = func(ev launch.Event) {
		switch ev.Step {
		case launch.StepBooting:
			p.Step(ev.Message)
		case launch.StepReady:
			p.Done("")
		}
	}
	g, err := launch.Boot(ctx, o)
	p.Done("")
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = g.Shutdown(sctx)
	}()

	env := map[string]string{}
	if pn.Network != nil {
		pn.Network.Hold = func(egress.Held) (int, error) {
			return 0, errors.New("airlock exec keeps no review to hold it in; run the command with airlock run, which holds it for the user's review")
		}
		netEnv, stopNet, err := pipeline.StartNetwork(ctx, pipeline.GuestMachine(g), pn.Network, filepath.Base(g.Dir), nil)
		if err != nil {
			return err
		}
		defer stopNet()
		env = netEnv
	}
	maps.Copy(env, pn.Env)
	return execIn(ctx, e, f, g, env, f.workdir, pn.Timeout, pn.OpenNetwork, args)
}

// runExecIn runs a command in the kept VM of a sandbox.
func runExecIn(ctx context.Context, e *env, f *execFlags, pn *plan.ExecPlan, args []string) error {
	g, err := launch.Attach(ctx, pn.Launch)
	if err != nil {
		return fmt.Errorf("%w (airlock run --keep keeps a sandbox's VM running)", err)
	}
	defer g.Client.Close()
	if g.Image == nil {
		// An attached machine does not say which image it booted: the
		// sandbox does, for its default user.
		g.Image = pn.Image
	}
	dir := f.workdir
	if dir == "" {
		dir = sandbox.Workspace
	}
	return execIn(ctx, e, f, g, pn.Env, dir, pn.Timeout, false, args)
}

// execIn runs args in g with the terminal, output and exit code handling
// of exec, as the image's default user (the full image's "agent"; root on
// the minimal image).
func execIn(ctx context.Context, e *env, f *execFlags, g *launch.Guest, env map[string]string, dir string, timeout time.Duration, open bool, args []string) error {
	errw := lockio.NewWriter(e.stderr)
	c := client.Command{Args: args, Env: env, Dir: dir, User: g.Image.User(), Stdout: e.stdout, Stderr: errw}
	var stdout, stderr bytes.Buffer
	if e.json {
		c.Stdout, c.Stderr = &limitedBuffer{buf: &stdout}, &limitedBuffer{buf: &stderr}
	}
	if f.interactive || f.tty {
		c.Stdin = e.stdin
	}
	if f.tty {
		restore, tty, err := setupTTY(ctx, e)
		if err != nil {
			return err
		}
		defer restore()
		c.TTY = tty
	}
	runCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeoutCause(ctx, timeout, fmt.Errorf("command ran longer than its %s time limit and was killed", timeout))
		defer cancel()
	}
	started := time.Now()
	runErr := g.Client.Run(runCtx, c)
	res := execResult{
		BootMS: g.BootTime.Milliseconds(), Warm: g.Warm, RunMS: time.Since(started).Milliseconds(),
		Kernel: g.Client.Welcome().Kernel, Link: string(g.Machine.LinkKind()), Network: "none",
	}
	if open {
		res.Network = "open"
	}
	var exit *client.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &exit):
		res.ExitCode, res.Signal = exit.ExitCode(), exit.Signal
	case runCtx.Err() != nil && ctx.Err() == nil:
		return context.Cause(runCtx)
	default:
		return fmt.Errorf("run %s: %w", args[0], runErr)
	}
	e.exitCode = res.ExitCode
	if e.json {
		res.Stdout, res.Stderr = stdout.String(), stderr.String()
		return e.printJSON(res)
	}
	return nil
}

// setupTTY puts the local terminal in raw mode and forwards its size.
func setupTTY(ctx context.Context, e *env) (restore func(), tty *client.TTY, err error) {
	in, ok := e.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return nil, nil, errors.New("--tty needs standard input to be a terminal")
	}
	fd := int(in.Fd())
	cols, rows, err := term.GetSize(fd)
	if err != nil {
		cols, rows = 80, 24
	}
	old, err := term.MakeRaw(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("put terminal in raw mode: %w", err)
	}
	resize := make(chan client.WindowSize, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-winch:
				if c, r, err := term.GetSize(fd); err == nil {
					select {
					case resize <- client.WindowSize{Rows: r, Cols: c}:
					default:
					}
				}
			}
		}
	}()
	termName := os.Getenv("TERM")
	if termName == "" {
		termName = "xterm-256color"
	}
	return func() {
		signal.Stop(winch)
		close(stop)
		_ = term.Restore(fd, old)
	}, &client.TTY{Term: termName, Rows: rows, Cols: cols, Resize: resize}, nil
}

func parseEnv(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n\x00") {
			return nil, fmt.Errorf("--env %q: want NAME=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
}

// maxCaptured caps what --json collects of each output stream.
const maxCaptured = 64 << 20

// limitedBuffer keeps the first maxCaptured bytes and drops the rest, so a
// chatty command cannot exhaust the host's memory.
type limitedBuffer struct {
	buf       *bytes.Buffer
	truncated bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxCaptured - l.buf.Len(); room < len(p) {
		l.truncated = true
		if room > 0 {
			l.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return l.buf.Write(p)
}
