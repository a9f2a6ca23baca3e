package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/vm"
)

// Checkpoints of a sandbox whose VM is live (airlock run --keep).

func newCheckpointCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoint ID NAME",
		Short: "Save a running sandbox's VM (memory, processes, workspace disk) as a named checkpoint",
		Long: `checkpoint saves the VM of a sandbox that is still running (airlock run
--keep) as checkpoint NAME: the machine is paused while its state is saved
and its workspace disk copied (reflinked where the file system can), then
runs on. The collected workspace manifest of that moment is kept with it.
airlock rollback ID NAME takes the sandbox back to it, processes included.

Checkpoints live in the sandbox's directory, checkpoints/NAME/; airlock
checkpoints ID lists them. A VM with a virtio-fs share (--sync virtiofs)
cannot be checkpointed.`,
		Example: `  airlock run --keep --project . -- make setup
  airlock checkpoint 3f2a before-tests
  airlock exec 3f2a -- make test
  airlock rollback 3f2a before-tests`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			cp, err := pipeline.Checkpoint(cmd.Context(), sb, args[1])
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(cp)
			}
			fmt.Fprintf(e.stdout, "checkpoint %s of %s saved: VM paused %s, state %s, disk copy %s%s\n", cp.Name, sb.ID,
				(time.Duration(cp.SaveMS) * time.Millisecond).String(), bytesize.Format(cp.StateBytes), bytesize.Format(cp.DiskBytes), reflinkNote(cp.Reflinked))
			return nil
		},
	}
}

func reflinkNote(r bool) string {
	if r {
		return " (reflinked)"
	}
	return ""
}

func newRollbackCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback ID NAME",
		Short: "Take a sandbox's VM back to a checkpoint: memory, processes and workspace disk",
		Long: `rollback stops the sandbox's VM (if it still runs), puts back the workspace
disk and the collected manifest of checkpoint NAME, and restores the VM from
the checkpoint's saved state under a new supervisor: the processes that ran
then run again, the files are as they were. The checkpoint is kept, so a
sandbox can be rolled back to it again.`,
		Example: `  airlock rollback 3f2a before-tests`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := e.home()
			if err != nil {
				return err
			}
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			backend, err := e.userBackend(h)
			if err != nil {
				return err
			}
			restorer, ok := backend.(vm.Restorer)
			if !ok {
				return fmt.Errorf("rollback: the %s backend cannot restore a machine: %w", backend.Name(), vm.ErrNotSupported)
			}
			d, err := pipeline.Rollback(cmd.Context(), sb, args[1], restorer)
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]any{"sandbox": sb.ID, "checkpoint": args[1], "rollback_ms": d.Milliseconds()})
			}
			fmt.Fprintf(e.stdout, "%s rolled back to %s in %s; its VM runs (airlock exec %s -- CMD)\n", sb.ID, args[1], d.Round(time.Millisecond), sb.ID)
			return nil
		},
	}
}

func newCheckpointsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoints ID",
		Short: "List a sandbox's checkpoints",
		Long:  `checkpoints lists the checkpoints of a sandbox, oldest first: name, when, how long the VM was paused, the saved state's size and the disk copy's.`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			cps, err := sb.Checkpoints()
			if err != nil {
				return err
			}
			if e.json {
				if cps == nil {
					return e.printJSON([]any{})
				}
				return e.printJSON(cps)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCREATED\tPAUSED\tSTATE\tDISK")
			for _, cp := range cps {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cp.Name, cp.Created.Local().Format(time.DateTime),
					(time.Duration(cp.SaveMS) * time.Millisecond).String(), bytesize.Format(cp.StateBytes), bytesize.Format(cp.DiskBytes))
			}
			return tw.Flush()
		},
	}
}
