package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// noteStaleness tells the user on stderr when the real project has moved
// on since the sandbox's baseline, and what apply does about it. It says
// nothing when the project is unchanged, and only warns when it cannot
// tell (a project moved away is not an error of diff or apply).
func noteStaleness(ctx context.Context, e *env, sb *sandbox.Sandbox) {
	if e.json {
		return
	}
	st, err := sb.Staleness(ctx)
	if err != nil {
		fmt.Fprintf(e.stderr, "airlock: note: cannot compare the project with the baseline: %v\n", err)
		return
	}
	if st.Behind() == 0 {
		return
	}
	fmt.Fprintf(e.stderr, "airlock: note: %s; apply merges the agent's changes into your edits three ways (airlock status %s lists them)\n", st, sb.ID)
}

const statusLong = `status shows one sandbox: its status, project and command, its stage
(sandbox, applied, committed, pushed: with the commit, branch and pull
request of airlock apply --commit/--branch and airlock push), the files
the snapshot left out because they look like secrets (with --json:
"secrets"), the comments of
its review (each with its file and lines: not sent yet, sent in round N,
or resolved), and how far the
real project has moved on since the sandbox's baseline was taken ("baseline
is 15 minutes and 3 files behind the project"), with the paths that differ.
The project is walked with the snapshot's rules and every file hashed, so
only real content changes count. A stale baseline is no obstacle: airlock
apply merges three ways (the snapshot, your edits, the agent's).

ID may be any unique prefix of the sandbox's ID.`

func newStatusCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "status ID",
		Short: "Show a sandbox, its review's comments and how far the real project has moved on since its baseline",
		Long:  statusLong,
		Example: `  airlock status 3f2a
  airlock status 3f2a --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), e, args[0])
		},
	}
}

// statusReport is what airlock status shows (and prints with --json).
type statusReport struct {
	sandbox.Meta
	Staleness sandbox.Staleness    `json:"staleness"`
	Comments  []review.FileComment `json:"comments,omitempty"`
	Actions   []sandbox.ActionView `json:"actions,omitempty"`
}

// runStatus shows sandbox id: its record, its review's comments and held
// actions, and how far the project has moved on.
func runStatus(ctx context.Context, e *env, id string) error {
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	var r statusReport
	if r.Meta, err = sb.Meta(); err != nil {
		return err
	}
	if r.Staleness, err = sb.Staleness(ctx); err != nil {
		return err
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		return err
	}
	r.Comments = d.AllComments()
	if r.Actions, err = sb.ActionViews(d); err != nil {
		return err
	}
	if e.json {
		return e.printJSON(r)
	}
	printStatus(e.stdout, r)
	return nil
}

// printStatus writes r for people.
func printStatus(w io.Writer, r statusReport) {
	m, st := r.Meta, r.Staleness
	fmt.Fprintf(w, "sandbox   %s (%s)\n", m.ID, m.Status)
	fmt.Fprintf(w, "project   %s\n", m.Project)
	fmt.Fprintf(w, "command   %s\n", m.CommandLine())
	fmt.Fprintf(w, "stage     %s\n", stageText(m))
	if m.Changes != nil {
		fmt.Fprintf(w, "changes   %d %s\n", m.Changes.Files, plural(m.Changes.Files, "file", "files"))
	}
	if m.DiskFull != nil {
		fmt.Fprintf(w, "disk      %s\n", pipeline.DiskFullMessage(*m.DiskFull))
	}
	if m.Verify != nil {
		fmt.Fprintf(w, "verify    %s: %s\n", m.Verify.Command, m.Verify)
	}
	if m.CacheFrom != "" {
		fmt.Fprintf(w, "caches    kept by sandbox %s's run (its verify passed): what it left could sway this result; airlock run --fresh-cache proves one without them\n", m.CacheFrom)
	}
	writeSecrets(w, m.Secrets)
	writeActionStates(w, m.ID, r.Actions)
	writeComments(w, r.Comments)
	fmt.Fprintf(w, "baseline  %s\n", st)
	for _, p := range st.Paths {
		fmt.Fprintf(w, "          %s\n", shownLine(w, p))
	}
	if n := st.Behind() - len(st.Paths); n > 0 {
		fmt.Fprintf(w, "          … and %d more\n", n)
	}
	if st.Behind() > 0 {
		fmt.Fprintln(w, strings.TrimSpace(`
apply merges the agent's changes into these edits three ways; if a file
conflicts, nothing is written until you choose for it (apply --resolve).`))
	}
}

// writeActionStates counts a sandbox's held actions by their state in
// one line.
func writeActionStates(w io.Writer, id string, views []sandbox.ActionView) {
	if len(views) == 0 {
		return
	}
	states := map[string]int{}
	var order []string
	for _, v := range views {
		if states[v.State()] == 0 {
			order = append(order, v.State())
		}
		states[v.State()]++
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d %s", states[s], s))
	}
	fmt.Fprintf(w, "actions   %d held for review: %s (airlock actions %s)\n", len(views), strings.Join(parts, ", "), id)
}

// writeSecrets lists for status what the snapshot left out because it
// looks like a secret (airlock run only counts them when there are many).
func writeSecrets(w io.Writer, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	fmt.Fprintf(w, "secrets   %d not copied, %s like secrets:\n", len(secrets), plural(len(secrets), "it looks", "they look"))
	for _, p := range secrets {
		fmt.Fprintf(w, "          %s\n", shownLine(w, p))
	}
}

// writeComments lists a review's comments for status: a count, then each
// with its file, lines, state and first line.
func writeComments(w io.Writer, comments []review.FileComment) {
	if len(comments) == 0 {
		return
	}
	pending := 0
	for _, c := range comments {
		if c.Pending() {
			pending++
		}
	}
	switch pending {
	case 0:
		fmt.Fprintf(w, "comments  %d (all sent or resolved)\n", len(comments))
	default:
		fmt.Fprintf(w, "comments  %d (%d not sent yet; airlock reply sends them)\n", len(comments), pending)
	}
	for _, c := range comments {
		first, rest, _ := strings.Cut(strings.TrimSpace(c.Text), "\n")
		if rest != "" {
			first += " …"
		}
		fmt.Fprintf(w, "          %s, %s (%s): %s\n", shownLine(w, c.Path), c.Where(), c.State(), shownLine(w, first))
	}
}
