package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/sandbox"
)

func newRmCmd(e *env) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Remove sandboxes (their changes are discarded; applied changes stay applied)",
		Long: `rm deletes a sandbox's directory: its snapshot manifests, transcript,
summary, audit log and apply journals (so an apply can no longer be undone
with airlock undo). A sandbox still running, or whose VM still runs, is refused
unless --force, which stops the VM first. The removal is recorded in
sandboxes/audit.jsonl.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := e.home()
			if err != nil {
				return err
			}
			st, err := e.sandboxes()
			if err != nil {
				return err
			}
			var removed []string
			var errs []error
			for _, a := range args {
				sb, err := e.openSandbox(cmd.Context(), a)
				if err == nil {
					err = removeSandbox(cmd.Context(), h, st, sb.ID, force)
				}
				if err != nil {
					errs = append(errs, err)
					continue
				}
				removed = append(removed, sb.ID)
				if !e.json {
					fmt.Fprintf(e.stdout, "removed %s\n", sb.ID)
				}
			}
			if e.json {
				if removed == nil {
					removed = []string{}
				}
				if err := e.printJSON(map[string]any{"removed": removed}); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove even a sandbox that is still running")
	return cmd
}

// removeSandbox removes sandbox id; one whose VM still runs is refused
// unless force, which kills the VM first.
func removeSandbox(ctx context.Context, h string, st *sandbox.Store, id string, force bool) error {
	if !force && vmState(ctx, h, id) != "" {
		return fmt.Errorf("remove %s: its VM is running (airlock stop %s, or rm --force)", id, id)
	}
	if force {
		if _, err := stopVM(ctx, h, id, 0, true); err != nil {
			return fmt.Errorf("remove %s: %w", id, err)
		}
	}
	return st.Remove(id, force)
}
