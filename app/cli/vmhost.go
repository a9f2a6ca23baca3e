package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/machine/vmhost"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/vm"
)

// userBackend is supervisedBackend with the idle TTL of the user's
// configuration (no project or flags): for commands that start VMs outside
// a run (the desktop app, rollback).
func (e *env) userBackend(h string) (vm.Backend, error) {
	pl, err := e.planner(h, lockio.NewWriter(e.stderr))
	if err != nil {
		return nil, err
	}
	eff, err := pl.Limits("", config.Limits{})
	if err != nil {
		return nil, err
	}
	return supervisedBackend(e, h, eff.Limits.IdleTTL.Std())
}

// supervisedBackend starts each VM under its own supervisor process: this
// program's hidden vmhost command, running this OS's backend. A VM left
// without a client for idleTTL (its airlock died) is stopped; zero keeps
// it until it is stopped.
func supervisedBackend(e *env, h string, idleTTL time.Duration) (vm.Backend, error) {
	hv, err := newBackend(e, h)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the airlock program for the VM supervisor: %w", err)
	}
	return &vmhost.Backend{
		Hypervisor: hv,
		Command: func(dir string) *exec.Cmd {
			return exec.Command(exe, "--home", h, "vmhost", "--idle-ttl", idleTTL.String(), dir)
		},
	}, nil
}

// newVMHostCmd is the supervisor of one VM (see app/machine/vmhost). airlock starts
// it itself, detached; people never do.
func newVMHostCmd(e *env) *cobra.Command {
	var idleTTL time.Duration
	cmd := &cobra.Command{
		Use:    "vmhost DIR",
		Short:  "Run the VM described in DIR/vmhost.json and serve its control and guest sockets",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := e.home()
			if err != nil {
				return err
			}
			backend, err := newSupervisorBackend(e, h)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(e.stderr, nil))
			return vmhost.Supervise(cmd.Context(), args[0], backend, idleTTL, log)
		},
	}
	cmd.Flags().DurationVar(&idleTTL, "idle-ttl", 0, "stop the VM when no client has been connected for this long (0: never)")
	return cmd
}

// runDir is the run directory of the VM named name (a sandbox ID, or the
// random name of an exec VM).
func runDir(h, name string) string { return home.Layout{Root: h}.Run(name) }

// vmState is the state of the VM of run directory name, or "" when no
// supervisor runs it.
func vmState(ctx context.Context, h, name string) string {
	c, err := vmhost.Dial(ctx, runDir(h, name))
	if err != nil {
		return ""
	}
	st, err := c.State(ctx)
	if err != nil {
		return ""
	}
	return st.State.String()
}

// stopVM stops the VM of run directory name through its supervisor (at once
// when kill is set) and removes the run directory. It returns false when no
// supervisor ran it.
func stopVM(ctx context.Context, h, name string, timeout time.Duration, kill bool) (bool, error) {
	dir := runDir(h, name)
	c, err := vmhost.Dial(ctx, dir)
	if errors.Is(err, vmhost.ErrNoSupervisor) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if kill {
		_, err = c.Kill(ctx)
	} else {
		_, err = c.Stop(ctx, timeout)
	}
	if err != nil {
		return true, fmt.Errorf("stop the VM of %s: %w", name, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return true, fmt.Errorf("stop the VM of %s: %w", name, err)
	}
	return true, nil
}

func newStopCmd(e *env) *cobra.Command {
	var timeout time.Duration
	var kill bool
	cmd := &cobra.Command{
		Use:   "stop ID...",
		Short: "Stop a sandbox's VM through its supervisor",
		Long: `stop powers off the VM of a sandbox (or of a VM that airlock exec started),
asking its supervisor: the guest gets --timeout to power off cleanly, then
the VM is forced off. The sandbox itself is kept: its changes stay ready for
review. airlock ls shows which sandboxes have a VM running.

ID may be any unique prefix of a sandbox's ID.`,
		Example: `  airlock stop 3f2a
  airlock stop --kill 3f2a`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStop(cmd.Context(), e, args, timeout, kill)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", vmhost.DefaultStopTimeout, "how long the guest has to power off before it is forced off")
	cmd.Flags().BoolVar(&kill, "kill", false, "force the VM off at once")
	return cmd
}

// runStop stops the VMs of the sandboxes (or exec VMs) named, each
// through its supervisor, and says which it stopped; an error for one
// does not stop the others.
func runStop(ctx context.Context, e *env, names []string, timeout time.Duration, kill bool) error {
	h, err := e.home()
	if err != nil {
		return err
	}
	st, err := e.sandboxes()
	if err != nil {
		return err
	}
	return e.forEach(names, "stopped", func(a string) (string, error) {
		name, err := st.Resolve(a)
		if errors.Is(err, sandbox.ErrNotFound) && filepath.Base(a) == a && a != "." && a != ".." {
			name, err = a, nil // an exec VM's run directory
		}
		if err != nil {
			return "", err
		}
		ran, err := stopVM(ctx, h, name, timeout, kill)
		if err == nil && !ran {
			err = fmt.Errorf("%s: %w", name, vmhost.ErrNoSupervisor)
		}
		return name, err
	})
}
