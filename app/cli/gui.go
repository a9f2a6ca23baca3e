package cli

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/lockio"
)

// GUI opens the desktop app and returns when it is closed. This package
// must not import fyne, so main hands it in (WithGUI); a build without
// the GUI has none.
type GUI func(ctx context.Context, s GUISetup) error

// GUISetup is what the desktop app is given: the sandbox store, how to
// boot a machine (the per-OS backend is chosen here, as for run), and
// where the demo agent's script is ("" if not found).
type GUISetup struct {
	Store *sandbox.Store
	// Planner plans the app's runs and Send back rounds exactly as
	// airlock run and airlock reply plan theirs: the same limits (the
	// user's config.toml and the project's airlock.toml), network, agent
	// presets, images and backend. Its notes and each request of a run's
	// proxy go to airlock's stderr.
	Planner    *plan.Planner
	DemoScript string
	// Agents are the agent presets (built-in and the user's agents.toml);
	// AgentsErr says why the user's file was left out, if it was.
	Agents    map[string]agent.Preset
	AgentsErr error
	// Project, if set, is a folder to open the run dialog for, as if it
	// were dropped on the window; with Start the run starts at once with
	// the first agent and the default settings.
	Project string
	Start   bool
	// Review, if set, is a sandbox whose review window opens, showing
	// File if that is set.
	Review string
	File   string
}

// Option changes how Main runs.
type Option func(*env)

// WithGUI makes `airlock gui` (and airlock started from a desktop with no
// arguments) open the desktop app g.
func WithGUI(g GUI) Option { return func(e *env) { e.gui = g } }

// WithPlanHook has f see the plan of every run before it starts; an
// error from f stops the run with that error. Tests compare what
// different ways of starting a run plan.
func WithPlanHook(f func(*plan.Plan) error) Option { return func(e *env) { e.onPlan = f } }

// WithSendNetwork has the actions an apply sends reach their hosts by
// dial, verified against roots, instead of the host's DNS and roots
// (tests: a local upstream under a real host name).
func WithSendNetwork(dial func(ctx context.Context, network, addr string) (net.Conn, error), roots *x509.CertPool) Option {
	return func(e *env) { e.sendDial, e.sendRoots = dial, roots }
}

// WithBuildNetwork has builder VMs reach the network through dial and
// trust roots instead of the host's DNS and roots, and build Dockerfiles
// on the image dockerBuilder (empty: the agent image with Docker): tests.
func WithBuildNetwork(dial func(ctx context.Context, network, addr string) (net.Conn, error), roots *x509.CertPool, dockerBuilder string) Option {
	return func(e *env) { e.buildDial, e.buildRoots, e.dockerBuilder = dial, roots, dockerBuilder }
}

func newGUICmd(e *env) *cobra.Command {
	var start bool
	var reviewID, file string
	cmd := &cobra.Command{
		Use:   "gui [PROJECT]",
		Short: "Open the desktop app",
		Long: `gui opens Airlock's desktop app: the sandboxes, a run started by dropping a
project folder on the window, the agent's terminal live, and the review of
its changes file by file and hunk by hunk. airlock started from a desktop
(no terminal, a display) with no arguments opens it too.

A PROJECT folder opens the run dialog for it, as dropping it on the window
does ("Open with Airlock" in a file manager); --start starts that run at
once with the first agent and the default settings. --review ID opens the
review window of a sandbox, at --file PATH if given.`,
		Example: `  airlock gui
  airlock gui ~/src/app
  airlock gui --review 1a2b --file src/main.go`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var project string
			if len(args) == 1 {
				project = args[0]
			}
			return runGUI(cmd.Context(), e, guiFlags{start: start, review: reviewID, file: file}, project)
		},
	}
	cmd.Flags().BoolVar(&start, "start", false, "start the run on PROJECT at once (first agent, default settings)")
	cmd.Flags().StringVar(&reviewID, "review", "", "open the review window of this sandbox")
	cmd.Flags().StringVar(&file, "file", "", "with --review: the file to show first")
	return cmd
}

// guiFlags are airlock gui's flags.
type guiFlags struct {
	start        bool
	review, file string
}

// runGUI opens the desktop app on the store and planner of the home, at
// project's run dialog or a sandbox's review if f or project say so.
func runGUI(ctx context.Context, e *env, f guiFlags, project string) error {
	if e.gui == nil {
		return errors.New("this build of airlock has no desktop app (it was built without cgo); the commands work as usual")
	}
	h, err := e.home()
	if err != nil {
		return err
	}
	store, err := sandbox.Open(h)
	if err != nil {
		return err
	}
	store.HostExec, store.MergeTool = userHostExec, userMergeTool
	// The app's VMs outlive a restart of the app, for the idle TTL.
	pl, err := e.planner(h, lockio.NewWriter(e.stderr))
	if err != nil {
		return err
	}
	setup := GUISetup{Store: store, Planner: pl, DemoScript: findDemoScript(), Start: f.start, File: f.file}
	if setup.Agents, setup.AgentsErr = loadAgents(); setup.AgentsErr != nil {
		// The app still opens, with the built-in presets; it says why.
		e.note("%v; the desktop app offers the built-in agents only", setup.AgentsErr)
		setup.Agents, _ = agent.Load("")
		pl.Agents = func() (map[string]agent.Preset, error) { return setup.Agents, nil }
	}
	switch {
	case project != "":
		if setup.Project, err = filepath.Abs(project); err != nil {
			return err
		}
	case f.start:
		return errors.New("--start needs a PROJECT folder")
	}
	if f.review != "" {
		if setup.Review, err = store.Resolve(f.review); err != nil {
			return err
		}
	}
	return e.gui(ctx, setup)
}

// findDemoScript looks for examples/demo-agent.sh in the working
// directory, beside the executable and one folder up (bin/airlock in a
// source tree).
func findDemoScript() string {
	var dirs []string
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe), filepath.Dir(filepath.Dir(exe)))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "examples", "demo-agent.sh")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// fromDesktop reports whether airlock was started from a desktop (the
// Finder, the Dock, a file manager) rather than a shell, and returns the
// arguments without macOS's process serial number (-psn_…), which the
// Finder adds. From a desktop means: no other arguments, and either that
// -psn_ argument, or neither stdin nor stdout a terminal while a display
// is there (always on macOS; DISPLAY or WAYLAND_DISPLAY elsewhere).
func fromDesktop(args []string, stdinTTY, stdoutTTY bool, goos string, getenv func(string) string) ([]string, bool) {
	psn := false
	rest := make([]string, 0, len(args))
	for _, a := range args {
		if strings.HasPrefix(a, "-psn_") {
			psn = true
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) > 0 {
		return rest, false
	}
	if psn {
		return rest, true
	}
	display := goos == "darwin" || getenv("DISPLAY") != "" || getenv("WAYLAND_DISPLAY") != ""
	return rest, !stdinTTY && !stdoutTTY && display
}
