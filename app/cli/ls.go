package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/sandbox"
)

func newLsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sandboxes: ID, status, VM (and checkpoints), age, sync mode, network, changed files, project, command",
		Long: `ls lists sandboxes, newest first. The VM column says whether a sandbox's VM
is running, as its supervisor reports it (it keeps running when the airlock
that started it dies; airlock stop ID stops it). With --quiet it prints only
their IDs, one per line, for scripts: airlock ls -q | head -1 is the newest.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLs(cmd.Context(), e)
		},
	}
}

// runLs lists the sandboxes with their VMs' states.
func runLs(ctx context.Context, e *env) error {
	st, err := e.sandboxes()
	if err != nil {
		return err
	}
	list, err := st.List()
	if err != nil {
		return err
	}
	h, err := e.home()
	if err != nil {
		return err
	}
	// Each sandbox's VM, as its supervisor (if one runs) says.
	rows := make([]lsRow, len(list))
	for i, s := range list {
		rows[i] = lsRow{Info: s, VM: vmState(ctx, h, s.ID)}
		if sb, err := st.Get(s.ID); err == nil {
			cps, _ := sb.Checkpoints()
			rows[i].Checkpoints = len(cps)
		}
	}
	switch {
	case e.json:
		return e.printJSON(rows)
	case e.quiet:
		for _, s := range list {
			fmt.Fprintln(e.stdout, s.ID)
		}
		return nil
	case len(list) == 0:
		fmt.Fprintln(e.stdout, "No sandboxes. Make one with: airlock run --project DIR -- COMMAND")
		return nil
	}
	return printLs(e.stdout, rows)
}

// printLs writes the sandboxes as a table for people.
func printLs(w io.Writer, rows []lsRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tVM\tAGE\tSYNC\tNETWORK\tCHANGED\tPROJECT\tCOMMAND")
	for _, s := range rows {
		changed := "-"
		if s.Changes != nil {
			changed = fmt.Sprint(s.Changes.Files)
		}
		status := s.StatusText()
		if s.Stage == sandbox.StageCommitted || s.Stage == sandbox.StagePushed {
			status = string(s.Stage)
		}
		if !s.Live && s.Status.Active() {
			status += " (interrupted)"
		}
		vmCol := s.VM
		if vmCol == "" {
			vmCol = "-"
		}
		if s.Checkpoints > 0 {
			vmCol += fmt.Sprintf(" (%d checkpoints)", s.Checkpoints)
		}
		network := "none"
		if s.Network.Open() {
			network = "OPEN (unprotected)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, status, vmCol, age(time.Since(s.Created)), syncMode(s.SyncMode), network, changed, shownLine(w, s.Project), shownLine(w, clip(s.CommandLine(), 40)))
	}
	return tw.Flush()
}

// lsRow is a sandbox as airlock ls shows it.
type lsRow struct {
	sandbox.Info
	// VM is the state of the sandbox's VM ("running", "paused", …) as its
	// supervisor reports it; empty when none runs.
	VM string `json:"vm,omitempty"`
	// Checkpoints counts the sandbox's checkpoints (airlock checkpoints ID).
	Checkpoints int `json:"checkpoints"`
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
