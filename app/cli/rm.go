package cli

import (
	"context"
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
			return runRm(cmd.Context(), e, args, force)
		},
	}
	cmd.Flags().BoolVarP(&force, "force", "f", false, "remove even a sandbox that is still running")
	return cmd
}

// runRm removes the sandboxes named and says which it removed; an error
// for one does not stop the others.
func runRm(ctx context.Context, e *env, names []string, force bool) error {
	h, err := e.home()
	if err != nil {
		return err
	}
	st, err := e.sandboxes()
	if err != nil {
		return err
	}
	return e.forEach(names, "removed", func(name string) (string, error) {
		sb, err := e.openSandbox(ctx, name)
		if err != nil {
			return "", err
		}
		return sb.ID, removeSandbox(ctx, h, st, sb.ID, force)
	})
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
