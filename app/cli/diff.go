package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/mattn/go-runewidth"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// diffFlags are airlock diff's flags.
type diffFlags struct {
	stat, summary, color, noColor, flagged bool
	round                                  int
}

func (f *diffFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.stat, "stat", false, "print a per-file summary instead of the diff")
	fs.BoolVar(&f.summary, "summary", false, "say what the changes mean (functions, types and classes added, removed, renamed, changed) instead of showing them")
	fs.BoolVar(&f.flagged, "flagged", false, "show only the files that deserve a second look (flagged: dependencies, CI, tests, credentials, …)")
	fs.IntVar(&f.round, "round", 0, "show only what reply round N changed (from round N-1's result), not the total against the snapshot")
	fs.BoolVar(&f.color, "color", false, "colour the diff even when not on a terminal")
	fs.BoolVar(&f.noColor, "no-color", false, "never colour the diff (also: NO_COLOR=1)")
}

const diffLong = `diff prints the changes a sandbox made to its copy of the project, as a
git-style unified diff that git apply accepts (binary files are named, not
shown). On a terminal it is coloured and every hunk is numbered, for
airlock apply --hunks PATH:N. With --stat it prints a summary like git diff
--stat; with --json the whole changeset (files, hunks, lines, flags, what
each change means). After airlock reply, --round N shows what round N
changed.

With --summary it says what the changes mean instead of showing them: the
run's overview in one line ("count_words: new parameter stop_words; added
STOP_WORDS; tests: added test_stopwords.py"), then per file the functions,
methods, types, classes and constants added, removed, renamed, moved or
changed (in signature, with the parameters named, or in body), read by the
language's own parser for Go, Python, JavaScript, TypeScript/TSX, Rust,
Java, C and C++; any other file gets its line counts.

After the files come the requests the agent made that were held for review
(staged actions, [[network.stage]]): one "# " line each, which git apply
ignores; airlock actions ID shows them whole.

A file that runs on your machine later (a git hook, .envrc, a Makefile,
package.json scripts, a CI workflow, a file made executable…) is marked
"# runs on your machine: <why>" before its diff (git apply ignores the
line) and in the --stat; airlock apply --all leaves it out unless named.

Other changes that deserve a second look are marked the same way, with the
reason: dependency manifests and lockfiles (the names added and removed),
CI configuration, tests deleted, skipped or narrowed (t.Skip, .only, an
assertion commented out), strings that look like credentials, large
deletions, generated and binary files. --stat counts them in one line
("3 files deserve a second look: …"), --json carries them ("flags" per
file, "second_look"), and --flagged shows only the flagged files.

ID may be any unique prefix of the sandbox's ID.`

func newDiffCmd(e *env) *cobra.Command {
	var f diffFlags
	cmd := &cobra.Command{
		Use:   "diff ID [PATH...]",
		Short: "Show a sandbox's changes as a unified diff (git format)",
		Long:  diffLong,
		Example: `  airlock diff 3f2a
  airlock diff 3f2a --stat
  airlock diff 3f2a --summary
  airlock diff 3f2a --flagged
  airlock diff 3f2a src/main.go`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd.Context(), e, &f, args[0], args[1:])
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// diffView is what airlock diff shows: the changeset (narrowed to the
// paths named and --flagged) and the held actions after it.
type diffView struct {
	sb    *sandbox.Sandbox
	cs    *review.Changeset
	views []sandbox.ActionView
}

// runDiff shows the changes of sandbox id, or of the paths named.
func runDiff(ctx context.Context, e *env, f *diffFlags, id string, paths []string) error {
	if f.stat && f.summary {
		return errors.New("--stat and --summary do not go together: they are two views of the changes, choose one")
	}
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	cs, err := sb.Changeset(ctx)
	if f.round > 0 {
		cs, err = sb.RoundChangeset(ctx, f.round)
	}
	if err != nil {
		return err
	}
	noteStaleness(ctx, e, sb)
	if len(paths) > 0 {
		if cs, err = onlyPaths(cs, paths); err != nil {
			return err
		}
	}
	if f.flagged {
		cs = onlyFlagged(cs)
		if len(cs.Files) == 0 && !e.json {
			fmt.Fprintln(e.stderr, "No file is flagged: nothing deserves a second look beyond the diff itself (airlock diff without --flagged shows it).")
		}
	}
	v := diffView{sb: sb, cs: cs}
	// The held actions come after the files: all of them, those of
	// round N with --round, none when paths are named.
	if len(paths) == 0 {
		if v.views, err = heldActions(ctx, sb, f.round); err != nil {
			return err
		}
	}
	if e.json || f.summary {
		if err := cs.Summarize(ctx); err != nil {
			return err
		}
	}
	if e.json {
		return printDiffJSON(e, v)
	}
	return printDiff(e, f, v)
}

// onlyPaths is cs with only the files at or under paths.
func onlyPaths(cs *review.Changeset, paths []string) (*review.Changeset, error) {
	sel := sandbox.Selection{Paths: paths, IncludeHostExec: true}
	d, err := sel.Decisions(cs)
	if err != nil {
		return nil, err
	}
	var keep []*review.File
	for _, f := range cs.Files {
		if _, ok := d.Files[f.Path]; ok {
			keep = append(keep, f)
		}
	}
	return &review.Changeset{Files: keep}, nil
}

// heldActions are the actions of sb held for review, those of round
// alone when it is not 0.
func heldActions(ctx context.Context, sb *sandbox.Sandbox, round int) ([]sandbox.ActionView, error) {
	d, err := sb.Decisions(ctx)
	if err != nil {
		return nil, err
	}
	views, err := sb.ActionViews(d)
	if err != nil {
		return nil, err
	}
	if round > 0 {
		views = slices.DeleteFunc(views, func(v sandbox.ActionView) bool { return v.Round != round })
	}
	return views, nil
}

// printDiffJSON prints what airlock diff --json prints: the changeset
// with its overview, what deserves a second look, and the held actions.
func printDiffJSON(e *env, v diffView) error {
	cs := v.cs
	if cs.Files == nil {
		cs.Files = []*review.File{}
	}
	return e.printJSON(struct {
		*review.Changeset
		Overview   string               `json:"overview"`
		SecondLook review.SecondLook    `json:"second_look"`
		Actions    []sandbox.ActionView `json:"actions,omitempty"`
	}{cs, cs.Overview(), cs.SecondLook(), v.views})
}

// printDiff prints the changes for a person (--summary, --stat, or the
// patch, coloured on a terminal) or, to a file or a pipe, the exact patch
// for git apply; the held actions follow.
func printDiff(e *env, f *diffFlags, v diffView) error {
	// The verify result heads what a person reads (--stat, a
	// terminal); a pipe gets the patch alone.
	gate := ""
	if m, err := v.sb.Meta(); err == nil && f.round == 0 {
		text, _ := m.VerifyGate()
		gate = "# airlock: " + safetext.Line(text)
	}
	printGate := func() {
		if gate != "" {
			fmt.Fprintln(e.stdout, gate)
		}
	}
	switch {
	case f.summary:
		printGate()
		writeSummary(e.stdout, v.cs)
	case f.stat:
		printGate()
		writeStat(e.stdout, v.cs, termWidth(e.stdout))
	default:
		patch, _ := review.Patch(v.cs, review.ApproveAll(v.cs), review.PatchOptions{})
		onTerminal := isTerminal(e.stdout)
		useColor := (onTerminal || f.color) && !f.noColor && os.Getenv("NO_COLOR") == ""
		if !onTerminal && !useColor {
			// A file or a pipe gets the exact bytes, for git apply,
			// which ignores the actions' "# " lines after the last hunk.
			if _, err := e.stdout.Write(patch); err != nil {
				return err
			}
			break
		}
		// What a person reads (a terminal, or colour for a pager) shows
		// every byte from the guest as it is: control sequences and
		// bidi characters as visible escapes.
		printGate()
		writeShownPatch(e.stdout, v.cs, patch, useColor)
	}
	writeActionsSection(e.stdout, v.views, v.sb.ID)
	return nil
}

// onlyFlagged is cs with only the files that carry a flag.
func onlyFlagged(cs *review.Changeset) *review.Changeset {
	var keep []*review.File
	for _, f := range cs.Files {
		if len(f.Flags) > 0 {
			keep = append(keep, f)
		}
	}
	return &review.Changeset{Files: keep}
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

// termWidth is the width --stat fits in: $COLUMNS when set, as git
// does, else the terminal's width, else 80.
func termWidth(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return max(n, minStatWidth)
	}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		if cols, _, err := termSize(f); err == nil && cols > 20 {
			return cols
		}
	}
	return 80
}

// minStatWidth is the narrowest width --stat lays out for.
const minStatWidth = 20

// writeStat prints a diffstat as git diff --stat does, in width columns:
// when the names, the counts and the bars do not fit, the bars shrink to
// 3/8 of the width and the names are shortened from the front, keeping
// their end ("…/tail/of/path.go"), so that no path makes a line wider.
// What follows a row's bar (a [mode] mark, why a file runs on your
// machine) is not shortened.
func writeStat(w io.Writer, cs *review.Changeset, width int) {
	type row struct {
		name   string
		suffix string // after the name, never shortened: " [control chars]"
		count  string
		add    int
		del    int
		binary bool // no line counts: a binary file, a directory, a type change
		mode   bool // a mode git cannot show: marked [mode]
		host   bool // runs on the user's machine: counted in its own line
		flags  []string
	}
	var rows []row
	nameW, countW, binW, maxChange, files := 0, 0, 0, 0, 0
	added, removed := cs.Stats()
	for _, f := range cs.Files {
		tc := f.TypeChange()
		if f.IsDir() && tc == "" {
			if f.HasFlag(review.FlagMode) {
				r := row{name: safetext.Line(f.Path) + "/", count: "dir", binary: true, mode: true}
				nameW = max(nameW, runewidth.StringWidth(r.name))
				rows = append(rows, r)
			}
			continue
		}
		files++
		r := row{name: f.Path, add: f.Added, del: f.Removed, mode: f.HasFlag(review.FlagMode), host: f.HasFlag(review.FlagHostExec), flags: statReasons(f)}
		if f.Status == review.Renamed {
			r.name = f.OldPath + " => " + f.Path
		}
		// Names come from the guest: shown safely wherever --stat is read.
		r.name = safetext.Line(r.name)
		if f.HasFlag(review.FlagControl) {
			r.suffix = " [control chars]"
		}
		switch {
		case tc != "":
			r.binary, r.count = true, tc
		case f.Binary:
			r.binary = true
			var o, n int64
			if f.Old != nil {
				o = f.Old.Size
			}
			if f.New != nil {
				n = f.New.Size
			}
			r.count = fmt.Sprintf("Bin %d -> %d bytes", o, n)
		default:
			r.count = fmt.Sprint(f.Added + f.Removed)
			maxChange = max(maxChange, f.Added+f.Removed)
			countW = max(countW, len(r.count))
		}
		nameW = max(nameW, runewidth.StringWidth(r.name+r.suffix))
		rows = append(rows, r)
	}
	for _, r := range rows {
		if r.binary {
			binW = max(binW, runewidth.StringWidth(r.count))
		}
	}
	nameW, barW := statWidths(max(width, minStatWidth), nameW, countW, maxChange, binW)
	flagged, marked := 0, false
	for _, r := range rows {
		mark := ""
		if r.mode {
			mark, marked = " [mode]", true
		}
		for _, reason := range r.flags {
			mark += "  # " + reason
		}
		if r.host {
			flagged++
		}
		name := padRight(shortenPath(r.name, nameW-runewidth.StringWidth(r.suffix))+r.suffix, nameW)
		if r.binary {
			fmt.Fprintf(w, " %s | %s%s\n", name, r.count, mark)
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
		fmt.Fprintf(w, " %s | %*s%s%s\n", name, countW, r.count, bar, mark)
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
	if look := cs.SecondLook(); saysMore(look) {
		fmt.Fprintln(w, " "+look.String())
	}
	if marked {
		fmt.Fprintln(w, " [mode]: the sandbox asked for a mode git cannot show, applied differently; airlock diff says how")
	}
	if flagged > 0 {
		fmt.Fprintf(w, " %d %s on your machine (marked #): airlock apply --all leaves %s out; name %s, or add --include-host-exec\n",
			flagged, plural(flagged, "file runs", "files run"), plural(flagged, "it", "them"), plural(flagged, "it", "each"))
	}
}

// statReasons are the reasons --stat writes after a file's row, each
// after "  # ": every flag but those marked otherwise ([mode], [control
// chars]).
func statReasons(f *review.File) []string {
	var out []string
	for _, fl := range f.Flags {
		if fl.Kind != review.FlagMode && fl.Kind != review.FlagControl {
			out = append(out, fl.Reason)
		}
	}
	return out
}

// saysMore reports whether the overview of the flags says more than the
// rest of --stat: a mode, control characters and files that run on your
// machine have their marks and their line already.
func saysMore(look review.SecondLook) bool {
	for _, k := range look.Kinds {
		switch k.Kind {
		case review.FlagMode, review.FlagControl, review.FlagHostExec:
		default:
			return true
		}
	}
	return false
}

// statWidths fits a diffstat's columns in width as git does. A row is
// " name | count bar", or " name | words" for a binary file or a type
// change (binW, the widest words), and the last column stays empty. When
// that does not fit, the bars get at most 3/8 of the width (at least 6
// columns) and the names what is left; unlike git, a binary row's words
// count too, so that no name makes a line overflow.
func statWidths(width, nameW, countW, maxChange, binW int) (names, bars int) {
	const fixed = 5 // " ", " | ", the empty last column
	right := func(bars int) int {
		r := binW
		if countW > 0 {
			r = max(r, countW+1+bars)
		}
		return r
	}
	spare := func(nameW int) int { return width - fixed - 1 - countW - nameW }
	if nameW+fixed+right(maxChange) <= width {
		return nameW, spare(nameW)
	}
	bars = maxChange
	if limit := width*3/8 - countW - fixed - 1; bars > limit {
		bars = max(limit, 6)
	}
	if avail := width - fixed - right(bars); nameW > avail {
		return max(avail, 5), bars
	}
	return nameW, spare(nameW)
}

// shortenPath fits name in width columns as git's --stat does: "..."
// and the end of the name, from a slash when one is left ("...
// /tail/of/path").
func shortenPath(name string, width int) string {
	if runewidth.StringWidth(name) <= width {
		return name
	}
	keep := max(width-3, 1)
	rs := []rune(name)
	i, w := len(rs), 0
	for i > 0 && w+runewidth.RuneWidth(rs[i-1]) <= keep {
		i--
		w += runewidth.RuneWidth(rs[i])
	}
	tail := string(rs[i:])
	if j := strings.IndexByte(tail, '/'); j >= 0 {
		tail = tail[j:]
	}
	return "..." + tail
}

// padRight pads s with spaces to width columns.
func padRight(s string, width int) string {
	if n := width - runewidth.StringWidth(s); n > 0 {
		return s + strings.Repeat(" ", n)
	}
	return s
}

func scale(n, total, width int) int {
	if n == 0 {
		return 0
	}
	return max(1, n*width/total)
}
