package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

func newApplyCmd(e *env) *cobra.Command {
	var all bool
	var hunks []string
	cmd := &cobra.Command{
		Use:   "apply ID [--all | PATH... | --hunks PATH:N[,N...]]",
		Short: "Write approved changes of a sandbox into the real project",
		Long: `apply writes the changes you approve into the real project: every change
(--all), whole files or folders (PATH...), or single hunks of a file
(--hunks PATH:1,3, numbered as airlock diff shows them); they combine.

Each file is checked against the snapshot first. A file you have not
touched since the run is written atomically; one you changed meanwhile is
merged three ways (the snapshot, yours, the agent's): a clean merge is
written, a conflict is shown and that file left exactly as it is. A journal
with backups is written before anything changes, so airlock undo ID
restores the project byte for byte, and an apply cut short (a crash, a
power cut) is finished by the next airlock command.

airlock exits 0 when everything approved was applied or merged, 1 when a
file conflicted, and 125 when Airlock itself failed.`,
		Example: `  airlock apply 3f2a --all
  airlock apply 3f2a src/main.go README.md
  airlock apply 3f2a --hunks src/main.go:1,3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sel := sandbox.Selection{All: all, Paths: args[1:]}
			if all && (len(args) > 1 || len(hunks) > 0) {
				return errors.New("--all approves everything: give either --all or paths and --hunks")
			}
			for _, h := range hunks {
				if err := sel.ParseHunks(h); err != nil {
					return err
				}
			}
			sb, err := e.openSandbox(ctx, args[0])
			if err != nil {
				return err
			}
			cs, err := sb.Changeset(ctx)
			if err != nil {
				return err
			}
			d, err := sel.Decisions(cs)
			if err != nil {
				return err
			}
			noteStaleness(ctx, e, sb)
			res, err := sb.Apply(ctx, d)
			if err != nil {
				return err
			}
			if len(res.Conflicts) > 0 {
				e.exitCode = 1
			}
			if e.json {
				return e.printJSON(res)
			}
			printApply(e, sb.ID, res)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "approve every change")
	cmd.Flags().StringArrayVar(&hunks, "hunks", nil, "approve hunks of a file, PATH:N[,N...] numbered from 1 (repeatable)")
	return cmd
}

func printApply(e *env, id string, res *sandbox.ApplyResult) {
	w := e.stdout
	for _, f := range res.Applied {
		fmt.Fprintf(w, "applied   %s\n", fileLabel(f))
	}
	for _, f := range res.Merged {
		fmt.Fprintf(w, "merged    %s (you changed it since the run; both changes kept)\n", fileLabel(f))
	}
	for _, f := range res.Skipped {
		fmt.Fprintf(w, "skipped   %s: %s\n", fileLabel(f), f.Reason)
	}
	for _, c := range res.Conflicts {
		fmt.Fprintf(w, "CONFLICT  %s: %s; left as it is\n", shownLine(w, c.Path), c.Reason)
		if c.Merge != nil {
			merged := c.Merge.WithMarkers(review.MarkerLabels{Base: "snapshot", Ours: "project now", Theirs: "sandbox " + id})
			writeIndented(w, merged, 40)
		}
	}
	fmt.Fprintf(w, "%d applied, %d merged, %d conflicts, %d skipped.", len(res.Applied), len(res.Merged), len(res.Conflicts), len(res.Skipped))
	if len(res.Applied)+len(res.Merged) > 0 {
		fmt.Fprintf(w, " Undo with: airlock undo %s", id)
	}
	fmt.Fprintln(w)
	if len(res.Conflicts) > 0 {
		fmt.Fprintln(w, "Conflicting files were not changed: edit them by hand, or apply the rest and leave them.")
	}
}

func fileLabel(f review.FileResult) string {
	// Paths came from the guest: escaped wherever this is read.
	if f.OldPath != "" {
		return safetext.Line(f.OldPath) + " => " + safetext.Line(f.Path)
	}
	return safetext.Line(f.Path)
}

func writeIndented(w io.Writer, data []byte, maxLines int) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i, l := range lines {
		if i == maxLines {
			fmt.Fprintf(w, "    … %d more lines\n", len(lines)-maxLines)
			break
		}
		fmt.Fprintln(w, "    "+shownLine(w, l))
	}
}
