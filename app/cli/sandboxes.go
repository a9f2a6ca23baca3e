package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

func (e *env) sandboxes() (*sandbox.Store, error) {
	h, err := e.home()
	if err != nil {
		return nil, err
	}
	return sandbox.Open(h)
}

// openSandbox resolves an ID (or unique prefix) and first finishes any
// apply of it that was interrupted, as every command that touches a
// sandbox must.
func (e *env) openSandbox(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	st, err := e.sandboxes()
	if err != nil {
		return nil, err
	}
	sb, err := st.Get(id)
	if err != nil {
		return nil, err
	}
	done, err := sb.Recover(ctx)
	for _, j := range done {
		e.note("finished an apply of %s that was interrupted (journal %s)", sb.ID, j)
	}
	return sb, err
}

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
				rows[i] = lsRow{Info: s, VM: vmState(cmd.Context(), h, s.ID)}
				if sb, err := st.Get(s.ID); err == nil {
					cps, _ := sb.Checkpoints()
					rows[i].Checkpoints = len(cps)
				}
			}
			if e.json {
				return e.printJSON(rows)
			}
			if e.quiet {
				for _, s := range list {
					fmt.Fprintln(e.stdout, s.ID)
				}
				return nil
			}
			if len(list) == 0 {
				fmt.Fprintln(e.stdout, "No sandboxes. Make one with: airlock run --project DIR -- COMMAND")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATUS\tVM\tAGE\tSYNC\tNETWORK\tCHANGED\tPROJECT\tCOMMAND")
			for _, s := range rows {
				changed := "-"
				if s.Changes != nil {
					changed = fmt.Sprint(s.Changes.Files)
				}
				status := string(s.Status)
				if s.Status != sandbox.StatusFailed && !s.Live && isActive(s.Status) {
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, status, vmCol, age(time.Since(s.Created)), syncMode(s.SyncMode), network, changed, s.Project, clip(s.CommandLine(), 40))
			}
			return tw.Flush()
		},
	}
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

// syncMode names a sandbox's sync mode; sandboxes from before the mode was
// recorded were copies.
func syncMode(m sandbox.SyncMode) sandbox.SyncMode {
	if m == "" {
		return sandbox.SyncCopy
	}
	return m
}

func isActive(s sandbox.Status) bool {
	switch s {
	case sandbox.StatusReady, sandbox.StatusApplied, sandbox.StatusFailed:
		return false
	}
	return true
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

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func newDiffCmd(e *env) *cobra.Command {
	var stat, color, noColor bool
	var round int
	cmd := &cobra.Command{
		Use:   "diff ID [PATH...]",
		Short: "Show a sandbox's changes as a unified diff (git format)",
		Long: `diff prints the changes a sandbox made to its copy of the project, as a
git-style unified diff that git apply accepts (binary files are named, not
shown). On a terminal it is coloured and every hunk is numbered, for
airlock apply --hunks PATH:N. With --stat it prints a summary like git diff
--stat; with --json the whole changeset (files, hunks, lines). After
airlock reply, --round N shows what round N changed.

ID may be any unique prefix of the sandbox's ID.`,
		Example: `  airlock diff 3f2a
  airlock diff 3f2a --stat
  airlock diff 3f2a src/main.go`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			cs, err := sb.Changeset(cmd.Context())
			if round > 0 {
				cs, err = sb.RoundChangeset(cmd.Context(), round)
			}
			if err != nil {
				return err
			}
			noteStaleness(cmd.Context(), e, sb)
			if len(args) > 1 {
				sel := sandbox.Selection{Paths: args[1:]}
				d, err := sel.Decisions(cs)
				if err != nil {
					return err
				}
				var keep []*review.File
				for _, f := range cs.Files {
					if _, ok := d.Files[f.Path]; ok {
						keep = append(keep, f)
					}
				}
				cs = &review.Changeset{Files: keep}
			}
			if e.json {
				if cs.Files == nil {
					cs.Files = []*review.File{}
				}
				return e.printJSON(cs)
			}
			if stat {
				writeStat(e.stdout, cs, termWidth(e.stdout))
				return nil
			}
			patch, _ := review.Patch(cs, review.ApproveAll(cs), review.PatchOptions{})
			useColor := (isTerminal(e.stdout) || color) && !noColor && os.Getenv("NO_COLOR") == ""
			if !useColor {
				_, err := e.stdout.Write(patch)
				return err
			}
			writeColored(e.stdout, patch)
			return nil
		},
	}
	cmd.Flags().BoolVar(&stat, "stat", false, "print a per-file summary instead of the diff")
	cmd.Flags().IntVar(&round, "round", 0, "show only what reply round N changed (from round N-1's result), not the total against the snapshot")
	cmd.Flags().BoolVar(&color, "color", false, "colour the diff even when not on a terminal")
	cmd.Flags().BoolVar(&noColor, "no-color", false, "never colour the diff (also: NO_COLOR=1)")
	return cmd
}

const (
	ansiReset = "\033[m"
	ansiBold  = "\033[1m"
	ansiRed   = "\033[31m"
	ansiGreen = "\033[32m"
	ansiCyan  = "\033[36m"
	ansiDim   = "\033[2m"
)

// writeColored colours a git patch as git does and numbers each file's
// hunks.
func writeColored(w io.Writer, patch []byte) {
	hunk := 0
	inHeader := false
	for _, line := range strings.SplitAfter(string(patch), "\n") {
		if line == "" {
			continue
		}
		body := strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(body, "diff --git "):
			hunk, inHeader = 0, true
			fmt.Fprintf(w, "%s%s%s\n", ansiBold, body, ansiReset)
		case strings.HasPrefix(body, "@@"):
			hunk++
			inHeader = false
			fmt.Fprintf(w, "%s%s%s %s[hunk %d]%s\n", ansiCyan, body, ansiReset, ansiDim, hunk, ansiReset)
		case inHeader || strings.HasPrefix(body, "# airlock:"):
			fmt.Fprintf(w, "%s%s%s\n", ansiBold, body, ansiReset)
		case strings.HasPrefix(body, "+"):
			fmt.Fprintf(w, "%s%s%s\n", ansiGreen, body, ansiReset)
		case strings.HasPrefix(body, "-"):
			fmt.Fprintf(w, "%s%s%s\n", ansiRed, body, ansiReset)
		default:
			fmt.Fprintln(w, body)
		}
	}
}

func termWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		if cols, _, err := termSize(f); err == nil && cols > 20 {
			return cols
		}
	}
	return 80
}

// writeStat prints a diffstat as git diff --stat does.
func writeStat(w io.Writer, cs *review.Changeset, width int) {
	type row struct {
		name   string
		count  string
		add    int
		del    int
		binary bool
	}
	var rows []row
	nameW, countW, maxChange := 0, 0, 0
	added, removed := cs.Stats()
	for _, f := range cs.Files {
		if f.IsDir() {
			continue
		}
		r := row{name: f.Path, add: f.Added, del: f.Removed}
		if f.Status == review.Renamed {
			r.name = f.OldPath + " => " + f.Path
		}
		if f.Binary {
			r.binary = true
			var o, n int64
			if f.Old != nil {
				o = f.Old.Size
			}
			if f.New != nil {
				n = f.New.Size
			}
			r.count = fmt.Sprintf("Bin %d -> %d bytes", o, n)
		} else {
			r.count = fmt.Sprint(f.Added + f.Removed)
			maxChange = max(maxChange, f.Added+f.Removed)
		}
		nameW = max(nameW, len(r.name))
		if !r.binary {
			countW = max(countW, len(r.count))
		}
		rows = append(rows, r)
	}
	barW := max(width-nameW-countW-6, 10)
	for _, r := range rows {
		if r.binary {
			fmt.Fprintf(w, " %-*s | %s\n", nameW, r.name, r.count)
			continue
		}
		a, d := r.add, r.del
		if maxChange > barW {
			a = scale(r.add, maxChange, barW)
			d = scale(r.del, maxChange, barW)
		}
		bar := strings.Repeat("+", a) + strings.Repeat("-", d)
		if bar != "" {
			bar = " " + bar
		}
		fmt.Fprintf(w, " %-*s | %*s%s\n", nameW, r.name, countW, r.count, bar)
	}
	files := "files"
	if len(rows) == 1 {
		files = "file"
	}
	line := fmt.Sprintf(" %d %s changed", len(rows), files)
	if added > 0 || removed == 0 {
		line += fmt.Sprintf(", %d %s(+)", added, plural(added, "insertion", "insertions"))
	}
	if removed > 0 || added == 0 {
		line += fmt.Sprintf(", %d %s(-)", removed, plural(removed, "deletion", "deletions"))
	}
	fmt.Fprintln(w, line)
}

func scale(n, total, width int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*width/total)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

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
		fmt.Fprintf(w, "CONFLICT  %s: %s; left as it is\n", c.Path, c.Reason)
		if c.Merge != nil {
			shown := c.Merge.WithMarkers(review.MarkerLabels{Base: "snapshot", Ours: "project now", Theirs: "sandbox " + id})
			writeIndented(w, shown, 40)
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
	if f.OldPath != "" {
		return f.OldPath + " => " + f.Path
	}
	return f.Path
}

func writeIndented(w io.Writer, data []byte, maxLines int) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i, l := range lines {
		if i == maxLines {
			fmt.Fprintf(w, "    … %d more lines\n", len(lines)-maxLines)
			break
		}
		fmt.Fprintln(w, "    "+l)
	}
}

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

func newLogsCmd(e *env) *cobra.Command {
	var auditOnly bool
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Show a sandbox's transcript, the agent's summary and its audit log",
		Long: `logs prints what the command printed (the transcript), the agent's
summary, and the audit log (created, excluded files, pushed, command and
exit, collected, decisions, applies with before/after hashes, undo).
--audit prints the audit log as it is stored, one JSON object per line.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if auditOnly {
				raw, err := sb.AuditRaw()
				if err != nil {
					return err
				}
				_, err = e.stdout.Write(raw)
				return err
			}
			transcript, err := sb.Transcript()
			if err != nil {
				return err
			}
			summary, err := sb.Summary()
			if err != nil {
				return err
			}
			events, err := sb.ReadAudit()
			if err != nil {
				return err
			}
			verifyLog, err := sb.VerifyLog()
			if err != nil {
				return err
			}
			final, err := sb.FinalMessage()
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]any{"sandbox": sb.ID, "transcript": string(transcript), "summary": summary, "final_message": final, "verify": string(verifyLog), "audit": events})
			}
			w := e.stdout
			fmt.Fprintf(w, "== transcript (%s)\n", sb.Path(sandbox.TranscriptFile))
			w.Write(transcript)
			if len(transcript) > 0 && !bytes.HasSuffix(transcript, []byte("\n")) {
				fmt.Fprintln(w)
			}
			if summary != "" {
				fmt.Fprintln(w, "== the agent's summary")
				fmt.Fprint(w, summary)
				if !strings.HasSuffix(summary, "\n") {
					fmt.Fprintln(w)
				}
			}
			if final != "" {
				fmt.Fprintln(w, "== the agent's final message")
				fmt.Fprint(w, final)
				if !strings.HasSuffix(final, "\n") {
					fmt.Fprintln(w)
				}
			}
			if verifyLog != nil {
				m, _ := sb.Meta()
				fmt.Fprintf(w, "== verify: %s (%s)\n", m.Verify.String(), sb.Path(sandbox.VerifyFile))
				w.Write(verifyLog)
				if len(verifyLog) > 0 && !bytes.HasSuffix(verifyLog, []byte("\n")) {
					fmt.Fprintln(w)
				}
			}
			fmt.Fprintln(w, "== audit")
			for _, ev := range events {
				fmt.Fprintf(w, "%s  %-10s %s\n", ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Event, auditDetail(ev))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&auditOnly, "audit", false, "print only the audit log, as JSON lines")
	return cmd
}

// auditDetail renders an event's data on one line for people.
func auditDetail(ev sandbox.Event) string {
	m, ok := ev.Data.(map[string]any)
	if !ok {
		return ""
	}
	switch ev.Event {
	case sandbox.EventEgress:
		return egressDetail(m)
	case sandbox.EventDecisions:
		files, _ := m["files"].(map[string]any)
		var parts []string
		for _, p := range slices.Sorted(maps.Keys(files)) {
			fd, _ := files[p].(map[string]any)
			s := p
			if v, ok := fd["verdict"].(string); ok && v != "" {
				s += " " + v
			}
			if hs, ok := fd["hunks"].(map[string]any); ok {
				var nums []string
				for _, k := range slices.Sorted(maps.Keys(hs)) {
					if h, _ := hs[k].(map[string]any); h["verdict"] == "approve" {
						n, _ := strconv.Atoi(k)
						nums = append(nums, strconv.Itoa(n+1))
					}
				}
				s += " hunks " + strings.Join(nums, ",")
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, "; ")
	case sandbox.EventExcluded:
		list, _ := m["excluded"].([]any)
		var parts []string
		for _, x := range list {
			if xm, ok := x.(map[string]any); ok {
				parts = append(parts, fmt.Sprintf("%v (%v)", xm["path"], xm["reason"]))
			}
		}
		if len(parts) == 0 {
			return "nothing"
		}
		return strings.Join(parts, ", ")
	case sandbox.EventApplied:
		var parts []string
		for _, k := range []string{"applied", "merged", "conflicts", "skipped"} {
			list, _ := m[k].([]any)
			var paths []string
			for _, x := range list {
				if xm, ok := x.(map[string]any); ok {
					paths = append(paths, fmt.Sprint(xm["path"]))
				}
			}
			if len(paths) > 0 {
				parts = append(parts, k+": "+strings.Join(paths, ", "))
			}
		}
		return strings.Join(parts, "; ")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}

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
	return cliError(st.Remove(id, force))
}
