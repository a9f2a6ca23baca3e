// Package cli is Airlock's command line: the cobra command tree, flag
// parsing, and the output layer that renders results as text for people or
// JSON for programs and progress as live lines on a terminal. Commands are
// thin: they wire the app's services (launch, image, guestbin, home) and
// print what those return. `airlock gui` opens the desktop app that main
// hands in (WithGUI).
//
// It must not import fyne (the GUI is its own package, app/gui) or a
// hypervisor package other than through the per-OS backend file.
package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/machine/guestbin"
	"github.com/airlock-dev/airlock/app/plan"
)

// Exit codes of airlock itself, chosen like docker's so that they do not
// collide with the exit codes of a command run in the guest.
const (
	ExitOK    = 0
	ExitError = 125 // airlock could not do what was asked
)

// Version is set at build time with -ldflags "-X ...cli.Version=...".
var Version = "dev"

// env is what every command gets: streams, flags shared by all, and lazily
// resolved services.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	json           bool
	quiet          bool
	homeFlag       string
	// exitCode is set by commands whose exit code is not simply 0/125
	// (exec passes the guest command's through).
	exitCode int
	// gui opens the desktop app; nil in a build without it.
	gui GUI
	// onPlan, if set, sees every run's plan before it starts; its error
	// stops the run (tests compare plans with it).
	onPlan func(*plan.Plan) error
	// sendDial and sendRoots replace the host's DNS and roots for the
	// actions apply sends (tests).
	sendDial  func(ctx context.Context, network, addr string) (net.Conn, error)
	sendRoots *x509.CertPool
	// buildDial, buildRoots and dockerBuilder are the planner's
	// BuildDial, BuildRootCAs and DockerBuilderBase (tests).
	buildDial     func(ctx context.Context, network, addr string) (net.Conn, error)
	buildRoots    *x509.CertPool
	dockerBuilder string
}

// home is Airlock's home for this command (--home, else home.Dir),
// created private to the user, or tightened when an older Airlock left it
// readable by others (home.Make), before anything is written below it.
func (e *env) home() (string, error) {
	h := e.homeFlag
	if h == "" {
		var err error
		if h, err = home.Dir(); err != nil {
			return "", err
		}
	}
	if err := home.Make(h); err != nil {
		return "", err
	}
	return h, nil
}

func (e *env) guestFinder(h string) guestbin.Finder {
	return guestbin.Finder{BuildDir: home.Layout{Root: h}.GuestCache()}
}

// Main runs the command line and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, opts ...Option) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	for _, o := range opts {
		o(e)
	}
	if e.gui != nil {
		rest, desktop := fromDesktop(args, isTerminal(stdin), isTerminal(stdout), runtime.GOOS, os.Getenv)
		if desktop {
			rest = []string{"gui"}
		}
		args = rest
	}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		e.printError(cliError(err))
		if e.exitCode != 0 {
			return e.exitCode
		}
		return ExitError
	}
	return e.exitCode
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "airlock",
		Short: "Run coding agents in throwaway Linux VMs and review what they change",
		Long: `Airlock runs an AI coding agent (or any command) inside a throwaway Linux
micro-VM on a copy of your project, then lets you review every change before
anything is written back. The VM is the boundary: the agent cannot touch your
files, your network or your credentials.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.PersistentFlags().BoolVar(&e.json, "json", false, "print results as JSON")
	root.PersistentFlags().BoolVarP(&e.quiet, "quiet", "q", false, "print only what needs you: errors, warnings, the sandbox and what to do next (no progress, no summaries)")
	root.PersistentFlags().StringVar(&e.homeFlag, "home", "", "Airlock's state directory (default $"+home.Env+" or the per-OS location)")
	root.AddCommand(newExecCmd(e), newRunCmd(e), newLsCmd(e), newStatusCmd(e), newCompareCmd(e), newReplyCmd(e), newDiffCmd(e), newApplyCmd(e), newExportCmd(e), newPushCmd(e), newActionsCmd(e), newUndoCmd(e), newLogsCmd(e), newRmCmd(e),
		newStopCmd(e), newCheckpointCmd(e), newRollbackCmd(e), newCheckpointsCmd(e), newVMHostCmd(e), newGUICmd(e), newDoctorCmd(e), newImageCmd(e), newEnvCmd(e), newVersionCmd(e), newTrustCmd(e), newAllowCmd(e), newAgentsCmd(e), newAuditCmd(e), newMCPCmd(e), newCollectCmd(e))
	return root
}

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Airlock's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e.json {
				return e.printJSON(map[string]string{"version": Version})
			}
			fmt.Fprintln(e.stdout, "airlock", Version)
			return nil
		},
	}
}

// printError writes err for a person (or as JSON with --json).
func (e *env) printError(err error) {
	if errors.Is(err, context.Canceled) {
		err = errors.New("interrupted")
	}
	if e.json {
		_ = writeJSON(e.stderr, map[string]string{"error": err.Error()})
		return
	}
	// An error may carry the guest's words (a setup step's or the Docker
	// daemon's output): on a terminal, their control sequences are shown
	// as escapes, never obeyed.
	fmt.Fprintf(e.stderr, "airlock: %s\n", shown(e.stderr, err.Error()))
}
