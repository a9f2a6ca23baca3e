package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

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
--stat; with --json the whole changeset (files, hunks, lines, flags). After
airlock reply, --round N shows what round N changed.

A file that runs on your machine later (a git hook, .envrc, a Makefile,
package.json scripts, a CI workflow, a file made executable…) is marked
"# runs on your machine: <why>" before its diff (git apply ignores the
line) and in the --stat; airlock apply --all leaves it out unless named.

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
				sel := sandbox.Selection{Paths: args[1:], IncludeHostExec: true}
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
			onTerminal := isTerminal(e.stdout)
			useColor := (onTerminal || color) && !noColor && os.Getenv("NO_COLOR") == ""
			if !onTerminal && !useColor {
				// A file or a pipe gets the exact bytes, for git apply.
				_, err := e.stdout.Write(patch)
				return err
			}
			// What a person reads (a terminal, or colour for a pager) shows
			// every byte from the guest as it is: control sequences and
			// bidi characters as visible escapes.
			writeShownPatch(e.stdout, cs, patch, useColor)
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
	ansiReset  = "\033[m"
	ansiBold   = "\033[1m"
	ansiRed    = "\033[31m"
	ansiGreen  = "\033[32m"
	ansiCyan   = "\033[36m"
	ansiYellow = "\033[33m"
	ansiDim    = "\033[2m"
)

// controlNote is what the diff says above a file flagged
// review.FlagControl.
const controlNote = "contains control or bidi characters, shown as \\xNN and <U+XXXX>: what you see here is what would be applied"

// writeShownPatch writes a git patch for a person: every line made safe
// to show (safetext), a note for each file flagged review.FlagControl,
// each file's hunks numbered, and, with colour, coloured as git does.
func writeShownPatch(w io.Writer, cs *review.Changeset, patch []byte, color bool) {
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return code + s + ansiReset
	}
	for _, f := range cs.Files {
		if f.HasFlag(review.FlagControl) {
			fmt.Fprintln(w, paint(ansiBold, "# airlock: "+safetext.Line(f.Path)+" "+controlNote))
		}
	}
	hunk := 0
	inHeader := false
	for _, line := range strings.SplitAfter(string(patch), "\n") {
		if line == "" {
			continue
		}
		// Rendered with its newline, so a CRLF line end stays one (a
		// carriage return that rewinds the line does not).
		body := strings.TrimSuffix(safetext.Text(line), "\n")
		switch {
		case strings.HasPrefix(body, "diff --git "):
			hunk, inHeader = 0, true
			fmt.Fprintln(w, paint(ansiBold, body))
		case strings.HasPrefix(body, "@@"):
			hunk++
			inHeader = false
			fmt.Fprintf(w, "%s %s\n", paint(ansiCyan, body), paint(ansiDim, fmt.Sprintf("[hunk %d]", hunk)))
		case strings.HasPrefix(body, "# ") && !strings.HasPrefix(body, "# airlock:"):
			// A flag before a file's diff ("# runs on your machine: …");
			// no header or binary literal line starts so.
			inHeader = false
			fmt.Fprintln(w, paint(ansiBold+ansiYellow, body))
		case inHeader || strings.HasPrefix(body, "# airlock:"):
			fmt.Fprintln(w, paint(ansiBold, body))
		case strings.HasPrefix(body, "+"):
			fmt.Fprintln(w, paint(ansiGreen, body))
		case strings.HasPrefix(body, "-"):
			fmt.Fprintln(w, paint(ansiRed, body))
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
		binary bool // no line counts: a binary file, a directory
		mode   bool // a mode git cannot show: marked [mode]
		flag   string
	}
	var rows []row
	nameW, countW, maxChange, files := 0, 0, 0, 0
	added, removed := cs.Stats()
	for _, f := range cs.Files {
		if f.IsDir() {
			if f.HasFlag(review.FlagMode) {
				r := row{name: f.Path + "/", count: "dir", binary: true, mode: true}
				nameW = max(nameW, len(r.name))
				rows = append(rows, r)
			}
			continue
		}
		files++
		r := row{name: f.Path, add: f.Added, del: f.Removed, mode: f.HasFlag(review.FlagMode), flag: sandbox.HostExecReason(f)}
		if f.Status == review.Renamed {
			r.name = f.OldPath + " => " + f.Path
		}
		// Names come from the guest: shown safely wherever --stat is read.
		r.name = safetext.Line(r.name)
		if f.HasFlag(review.FlagControl) {
			r.name += " [control chars]"
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
	flagged, marked := 0, false
	for _, r := range rows {
		mark := ""
		if r.mode {
			mark, marked = " [mode]", true
		}
		if r.flag != "" {
			mark += "  # " + r.flag
			flagged++
		}
		if r.binary {
			fmt.Fprintf(w, " %-*s | %s%s\n", nameW, r.name, r.count, mark)
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
		fmt.Fprintf(w, " %-*s | %*s%s%s\n", nameW, r.name, countW, r.count, bar, mark)
	}
	noun := "files"
	if files == 1 {
		noun = "file"
	}
	line := fmt.Sprintf(" %d %s changed", files, noun)
	if added > 0 || removed == 0 {
		line += fmt.Sprintf(", %d %s(+)", added, plural(added, "insertion", "insertions"))
	}
	if removed > 0 || added == 0 {
		line += fmt.Sprintf(", %d %s(-)", removed, plural(removed, "deletion", "deletions"))
	}
	fmt.Fprintln(w, line)
	if marked {
		fmt.Fprintln(w, " [mode]: the sandbox asked for a mode git cannot show, applied differently; airlock diff says how")
	}
	if flagged > 0 {
		fmt.Fprintf(w, " %d %s on your machine (marked #): airlock apply --all leaves %s out; name %s, or add --include-host-exec\n",
			flagged, plural(flagged, "file runs", "files run"), plural(flagged, "it", "them"), plural(flagged, "it", "each"))
	}
}

func scale(n, total, width int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*width/total)
}
