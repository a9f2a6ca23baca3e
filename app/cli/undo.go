package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newUndoCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "undo ID",
		Short: "Revert the last apply of a sandbox, byte for byte",
		Long: `undo restores every file the sandbox's last apply touched to exactly what
it was before. If you changed one of those files since, nothing is undone
and the files are named: undoing would lose your edits.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			journal, err := sb.Undo(cmd.Context())
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]string{"sandbox": sb.ID, "undone": journal})
			}
			fmt.Fprintf(e.stdout, "Undid the last apply of %s: the project is as it was before it.\n", sb.ID)
			return nil
		},
	}
}
