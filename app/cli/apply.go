package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlock-dev/airlock/app/heldreq"
	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// applyFlags are airlock apply's flags.
type applyFlags struct {
	all, includeHostExec, partial, dryRun, commit bool
	hunks, resolve, send                          []string
	message, branch                               string
}

func (f *applyFlags) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&f.all, "all", "a", false, "approve every change")
	fs.StringArrayVar(&f.hunks, "hunks", nil, "approve hunks of a file, PATH:N[,N...] numbered from 1 (repeatable)")
	fs.BoolVar(&f.includeHostExec, "include-host-exec", false, "let --all and folders take files that run on your machine too (git hooks, .envrc, Makefile…)")
	fs.StringArrayVar(&f.resolve, "resolve", nil, "resolve a file in conflict, PATH=mine|theirs|both: keep yours, take the agent's, or keep both sides (repeatable)")
	fs.StringArrayVar(&f.send, "send", nil, "approve held actions N[,N...] and send them after the files (repeatable; airlock actions ID lists them)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "show the files that would be written and the actions that would be sent; change nothing")
	fs.BoolVar(&f.partial, "partial", false, "when files conflict, still write the others (by default a conflict stops the whole apply and nothing is written)")
	fs.BoolVar(&f.commit, "commit", false, "commit the files written, as one git commit on the current branch")
	fs.StringVarP(&f.message, "message", "m", "", "the commit's message (default: the agent's summary)")
	fs.StringVar(&f.branch, "branch", "", "commit on a new branch NAME from the baseline's commit, leaving the working tree and index alone")
}

// options are the apply's options: all or nothing unless --partial, and
// the --resolve choices.
func (f *applyFlags) options() (sandbox.ApplyOptions, error) {
	opts := sandbox.ApplyOptions{AllOrNothing: !f.partial}
	for _, r := range f.resolve {
		p, choice, err := parseResolve(r)
		if err != nil {
			return opts, err
		}
		if opts.Resolutions == nil {
			opts.Resolutions = map[string]review.Resolution{}
		}
		opts.Resolutions[p] = review.Resolution{Choice: choice}
	}
	return opts, nil
}

// checkCommit refuses -m, --commit and --branch where they mean nothing.
func (f *applyFlags) checkCommit(filesNamed bool) error {
	if f.message != "" && !f.commit && f.branch == "" {
		return errors.New("-m is the commit's message: add --commit (or --branch NAME)")
	}
	if (f.commit || f.branch != "") && !filesNamed {
		return errors.New("--commit and --branch commit files: name them, use --hunks PATH:N, or --all")
	}
	return nil
}

const applyLong = `apply writes the changes you approve into the real project: every change
(--all), whole files or folders (PATH...), or single hunks of a file
(--hunks PATH:1,3, numbered as airlock diff shows them); they combine.

Files that run on your machine later (git hooks, .envrc, editor tasks,
Makefiles, package.json scripts, CI workflows, files made executable, the
patterns of [review] host_exec in config.toml; airlock diff marks them)
are left out of --all and of a folder named, each with the reason: name
each one to apply it, or add --include-host-exec to take them all.

Each file is checked against the snapshot first. A file you have not
touched since the run is written atomically; one you changed meanwhile is
merged three ways (the snapshot, yours, the agent's) and a clean merge is
written. When a file conflicts (your edits overlap the agent's), nothing at
all is written, so the project is never left half-applied: the conflicts
are shown, and you run the apply again choosing for each file with
--resolve PATH=mine (keep your version), PATH=theirs (take the agent's
approved change) or PATH=both (keep both sides of each conflicting
stretch, yours first; text files only). --partial writes the files that do
not conflict and leaves the conflicting ones exactly as they are. (The
desktop app's conflict window offers the same, and a merge tool.)

A journal with backups is written before anything changes, so airlock
undo ID restores the project byte for byte, resolutions included, and an
apply cut short (a crash, a power cut) is finished by the next airlock
command. With --json the result lists the conflicts with the three
versions of each file (base, ours: the project, theirs: the approved
change, base64), "held": true when nothing was written, and "withheld":
the files that would have been.

Requests the agent made that were held for review (staged actions: airlock
actions ID lists them) are sent after the files are written: those you
approved (airlock actions ID --approve N, or the app) and those named with
--send N, never those you rejected or have not decided on (the apply names
those that wait), each at most once, in the order the
agent made them, from this computer with your real credential. airlock
undo cannot unsend them. An apply held by a conflict sends nothing; one cut
short while sending is resumed by the next apply without sending any action
twice. --dry-run shows the files that would be written and the actions that
would be sent, and changes nothing.

--commit makes one git commit of exactly the files the apply wrote, on the
current branch; --branch NAME makes it on a new branch from the commit the
sandbox's baseline was taken at, and writes nothing to the working tree or
the index (see "Promotion" below and airlock push).

airlock exits 0 when everything approved was applied, merged or resolved
(files left out because they run on your machine included) and every
action sent, 1 when a file conflicted or an action could not be sent, and
125 when Airlock itself failed.

Promotion: the commit's message is -m MSG, or the agent's summary
(.airlock/summary.md: its first line the subject, the rest the body), or
its final message, with the trailers Airlock-Sandbox, Airlock-Agent,
Airlock-Verify (passed, failed or not run) and Airlock-Receipt (the hash of
the audit log's last line as the commit is made: airlock audit export writes
the receipt that names it). --commit stages only the paths
it wrote (never git add -A) and refuses, before writing anything, an index
that holds changes you staged; airlock undo takes the files back, the
commit stays (git reset HEAD~ drops it). --branch builds the commit in a
temporary index from the baseline's commit and the approved contents, and
refuses a branch that exists; held actions are not sent. Both use git on
this computer and need the project to be in a git repository.`

func newApplyCmd(e *env) *cobra.Command {
	var f applyFlags
	cmd := &cobra.Command{
		Use:   "apply ID [--all [--include-host-exec] | PATH... | --hunks PATH:N[,N...]] [--resolve PATH=mine|theirs|both]... [--partial] [--send N[,N...]] [--dry-run] [--commit [-m MSG] | --branch NAME]",
		Short: "Write approved changes of a sandbox into the real project",
		Long:  applyLong,
		Example: `  airlock apply 3f2a --all
  airlock apply 3f2a --all --include-host-exec
  airlock apply 3f2a src/main.go README.md .envrc
  airlock apply 3f2a --hunks src/main.go:1,3
  airlock apply 3f2a --all --resolve TODO.md=theirs --resolve src/main.go=both
  airlock apply 3f2a --all --partial
  airlock apply 3f2a --all --send 1,2
  airlock apply 3f2a --all --dry-run
  airlock apply 3f2a --all --commit
  airlock apply 3f2a src/main.go --commit -m "Rate-limit the login endpoint"
  airlock apply 3f2a --all --branch agent/rate-limit`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApply(cmd.Context(), e, &f, args[0], args[1:])
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// runApply applies the changes of sandbox id that f and paths select,
// and sends the actions f names.
func runApply(ctx context.Context, e *env, f *applyFlags, id string, paths []string) error {
	sel, err := selectionOf(f.all, paths, f.hunks, f.includeHostExec)
	if err != nil {
		return err
	}
	opts, err := f.options()
	if err != nil {
		return err
	}
	sb, cs, err := e.openChangeset(ctx, id)
	if err != nil {
		return err
	}
	filesNamed := f.all || len(paths) > 0 || len(f.hunks) > 0
	var d review.Decisions
	if filesNamed {
		if d, err = sel.Decisions(cs); err != nil {
			return err
		}
	}
	if f.branch == "" {
		noteStaleness(ctx, e, sb) // a branch starts at the baseline: nothing merges
	}
	if filesNamed {
		noteVerify(e, sb)
	}
	actions, err := actionsToSend(ctx, e, sb, f.send, f.dryRun)
	if err != nil {
		return err
	}
	if !filesNamed && len(actions) == 0 && len(f.send) == 0 {
		return nothingSelected(sb, sel, cs)
	}
	if err := f.checkCommit(filesNamed); err != nil {
		return err
	}
	switch {
	case f.dryRun:
		return printDryRun(e, sb.ID, cs, d, sel.LeftOut(cs), actions)
	case f.branch != "":
		return applyBranch(ctx, e, sb, cs, d, sel, f.message, f.branch, len(actions))
	case !filesNamed:
		return sendOnly(ctx, e, sb, actions)
	}
	return applyFiles(ctx, e, sb, f, applyPlan{cs: cs, d: d, sel: sel, opts: opts, actions: actions})
}

// nothingSelected is apply's error when neither files nor actions were
// named: it says how to name them.
func nothingSelected(sb *sandbox.Sandbox, sel sandbox.Selection, cs *review.Changeset) error {
	_, err := sel.Decisions(cs)
	if err == nil {
		err = errors.New("nothing selected: name files, use --hunks PATH:N, or --all")
	}
	if views, _ := sb.ActionViews(review.Decisions{}); len(views) > 0 {
		err = fmt.Errorf("%w; or send held actions with --send N (airlock actions %s lists them)", err, sb.ID)
	}
	return err
}

// sendOnly sends the actions of an apply that names no files (--send).
func sendOnly(ctx context.Context, e *env, sb *sandbox.Sandbox, actions []sandbox.Action) error {
	if len(actions) == 0 {
		fmt.Fprintln(e.stderr, "airlock: nothing to send: every action named was sent before")
	}
	sent, err := sendActions(ctx, e, sb, actions)
	if err != nil {
		return err
	}
	if e.json {
		if sent == nil {
			sent = []sandbox.ActionResult{}
		}
		return e.printJSON(map[string]any{"actions": sent})
	}
	return nil
}

// applyPlan is what runApply settled before writing: the changeset, the
// decisions taken from the selection, the options and the actions to send.
type applyPlan struct {
	cs      *review.Changeset
	d       review.Decisions
	sel     sandbox.Selection
	opts    sandbox.ApplyOptions
	actions []sandbox.Action
}

// applyFiles writes the approved files (and commits them with --commit),
// then sends the actions unless a conflict held the apply.
func applyFiles(ctx context.Context, e *env, sb *sandbox.Sandbox, f *applyFlags, ap applyPlan) error {
	var cr *promote.CommitResult
	var res *sandbox.ApplyResult
	var err error
	if f.commit {
		res, cr, err = promote.ApplyCommit(ctx, sb, ap.d, ap.opts, promote.CommitOptions{Message: f.message})
	} else {
		res, err = sb.ApplyWith(ctx, ap.d, ap.opts)
	}
	if res == nil {
		return err
	}
	commitErr := err
	for p := range ap.opts.Resolutions {
		if !slices.ContainsFunc(res.Resolved, func(r review.FileResult) bool { return r.Path == p }) &&
			!slices.ContainsFunc(res.Conflicts, func(c *review.ConflictError) bool { return c.Path == p }) {
			e.note("--resolve %s: %s did not conflict; the choice was not needed", shellArg(p), displayPath(p))
		}
	}
	for _, lf := range ap.sel.LeftOut(ap.cs) {
		res.LeftOut = append(res.LeftOut, review.Skip{Path: lf.Path, Reason: lf.FlagReason(review.FlagHostExec)})
	}
	if len(res.Conflicts) > 0 {
		e.exitCode = 1
	}
	if !e.json {
		printApply(e, sb.ID, res)
		printCommit(e, sb.ID, cr)
	}
	if commitErr != nil {
		return commitErr
	}
	var sent []sandbox.ActionResult
	switch {
	case len(ap.actions) > 0 && res.Held:
		w := e.stdout
		if e.json {
			w = e.stderr
		}
		fmt.Fprintf(w, "%d approved %s not sent either: the apply was held.\n", len(ap.actions), plural(len(ap.actions), "action was", "actions were"))
	case len(ap.actions) > 0:
		if sent, err = sendActions(ctx, e, sb, ap.actions); err != nil {
			return err
		}
	}
	if !res.Held {
		sayActionsWaiting(ctx, e, sb)
	}
	if e.json {
		return printApplyJSON(e, sb, res, sent, cr)
	}
	return nil
}

// sayActionsWaiting tells, after the files are written, of the held
// actions no one decided on: an apply sends none of them, rightly, and
// they wait (on standard error, so --json's output stays one object).
func sayActionsWaiting(ctx context.Context, e *env, sb *sandbox.Sandbox) {
	actions, err := sb.Actions()
	if err != nil || len(actions) == 0 {
		return
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		return
	}
	j, err := sb.SendJournal()
	if err != nil {
		return
	}
	var waiting []string
	for _, a := range actions {
		if d.Actions[a.ID] == review.Undecided && j[a.ID].State == sandbox.NotSent {
			waiting = append(waiting, fmt.Sprintf("#%d", a.ID))
		}
	}
	if len(waiting) == 0 {
		return
	}
	fmt.Fprintf(e.stderr, "%d held %s for your decision, not sent (%s): airlock actions %s shows %s; send with airlock apply %s --send N\n",
		len(waiting), plural(len(waiting), "action waits", "actions wait"), strings.Join(firstFew(waiting, 5), " "), sb.ID, plural(len(waiting), "it", "them"), sb.ID)
}

// firstFew is s cut to n, with an ellipsis for the rest.
func firstFew(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clone(s[:n]), "…")
	}
	return s
}

// printApplyJSON prints what airlock apply --json prints: the apply's
// result with the actions sent, the commit made and the sandbox's verify.
func printApplyJSON(e *env, sb *sandbox.Sandbox, res *sandbox.ApplyResult, sent []sandbox.ActionResult, cr *promote.CommitResult) error {
	m, _ := sb.Meta()
	return e.printJSON(struct {
		*sandbox.ApplyResult
		Actions []sandbox.ActionResult `json:"actions,omitempty"`
		Commit  *promote.CommitResult  `json:"commit,omitempty"`
		// Verify is what the sandbox's verify found (null: none ran).
		Verify *sandbox.VerifyResult `json:"verify"`
	}{res, sent, cr, m.Verify})
}

// printDryRun says what an apply would do: the files d approves (those
// the selection left out named) and the actions it would send.
func printDryRun(e *env, id string, cs *review.Changeset, d review.Decisions, leftOut []*review.File, actions []sandbox.Action) error {
	var files []string
	for _, f := range cs.Files {
		if _, ok := d.Files[f.Path]; ok {
			files = append(files, f.Path)
		}
	}
	if e.json {
		if files == nil {
			files = []string{}
		}
		if actions == nil {
			actions = []sandbox.Action{}
		}
		return e.printJSON(map[string]any{"dry_run": true, "files": files, "actions": actions})
	}
	w := e.stdout
	for _, p := range files {
		fmt.Fprintf(w, "would write  %s\n", displayPath(p))
	}
	for _, f := range leftOut {
		fmt.Fprintf(w, "left out     %s (%s)\n", displayPath(f.Path), f.FlagReason(review.FlagHostExec))
	}
	for _, a := range actions {
		fmt.Fprintf(w, "would send   #%d %s\n             %s %s\n", a.ID, heldreq.Describe(a.Held), safetext.Line(a.Method), safetext.Line(a.URL()))
	}
	fmt.Fprintf(w, "Dry run: nothing was written or sent. %d %s, %d %s.", len(files), plural(len(files), "file", "files"), len(actions), plural(len(actions), "action", "actions"))
	if len(actions) > 0 {
		fmt.Fprint(w, " Actions are sent from this computer and airlock undo cannot unsend them.")
	}
	fmt.Fprintln(w)
	return nil
}

// noteVerify warns, before an apply writes anything, when the sandbox's
// verify failed or did not run: the changes were not checked there.
func noteVerify(e *env, sb *sandbox.Sandbox) {
	m, err := sb.Meta()
	if err != nil {
		return
	}
	if text, ok := m.VerifyGate(); !ok {
		e.note("warning: %s", text)
		if m.Verify != nil && m.Verify.Error == "" {
			e.note("its output: airlock logs %s", sb.ID)
		}
	}
}

// selectionOf is the selection apply and export are given: --all, or
// paths and --hunks PATH:N,...
func selectionOf(all bool, paths, hunks []string, includeHostExec bool) (sandbox.Selection, error) {
	sel := sandbox.Selection{All: all, Paths: paths, IncludeHostExec: includeHostExec}
	if all && (len(paths) > 0 || len(hunks) > 0) {
		return sel, errors.New("--all approves everything: give either --all or paths and --hunks")
	}
	for _, h := range hunks {
		if err := sel.ParseHunks(h); err != nil {
			return sel, err
		}
	}
	return sel, nil
}

// parseResolve reads --resolve PATH=CHOICE; the choice is after the last
// "=", so a path may hold one.
func parseResolve(s string) (string, review.Choice, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 {
		return "", "", fmt.Errorf("--resolve %q: want PATH=mine, PATH=theirs or PATH=both", s)
	}
	c, err := review.ParseChoice(s[i+1:])
	if err != nil {
		return "", "", fmt.Errorf("--resolve %q: %w", s, err)
	}
	return cleanPath(s[:i]), c, nil
}

// cleanPath is a project path as typed ("./src/a.go") as Airlock names it.
func cleanPath(p string) string {
	return strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "./")
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
	for _, f := range res.LeftOut {
		fmt.Fprintf(w, "left out  %s (%s); apply it with --include-host-exec or name it: airlock apply %s %s\n", displayPath(f.Path), f.Reason, id, shellArg(f.Path))
	}
	for _, f := range res.Resolved {
		fmt.Fprintf(w, "resolved  %s (%s)\n", fileLabel(f), resolutionWords(f.Resolution))
	}
	for _, f := range res.Withheld {
		fmt.Fprintf(w, "held      %s (not written: another file conflicts)\n", fileLabel(f))
	}
	for _, c := range res.Conflicts {
		fmt.Fprintf(w, "CONFLICT  %s: %s; left as it is\n", shownLine(w, c.Path), c.Reason)
		if c.Merge != nil {
			merged := c.Merge.WithMarkers(review.MarkerLabels{Base: "snapshot", Ours: "project now", Theirs: "sandbox " + id})
			writeIndented(w, merged, 40)
		}
	}
	if res.Held {
		fmt.Fprintf(w, "Nothing was written: %d %s, and the apply is all or nothing.\n", len(res.Conflicts), plural(len(res.Conflicts), "file conflicts", "files conflict"))
		fmt.Fprintf(w, "Run the same apply again with a choice for each: ")
		for i, c := range res.Conflicts {
			if i > 0 {
				fmt.Fprint(w, " ")
			}
			fmt.Fprintf(w, "--resolve %s", shellArg(c.Path+"=theirs"))
		}
		fmt.Fprintln(w, " (or =mine to keep yours, =both to keep both sides);")
		fmt.Fprintln(w, "or add --partial to write the other files and leave these as they are.")
		return
	}
	fmt.Fprintf(w, "%d applied, %d merged, %d conflicts, %d skipped", len(res.Applied), len(res.Merged), len(res.Conflicts), len(res.Skipped))
	if n := len(res.Resolved); n > 0 {
		fmt.Fprintf(w, ", %d resolved", n)
	}
	if n := len(res.LeftOut); n > 0 {
		fmt.Fprintf(w, ", %d left out (%s on your machine)", n, plural(n, "runs", "run"))
	}
	fmt.Fprint(w, ".")
	if res.JournalDir != "" && (len(res.Applied)+len(res.Merged) > 0 || slices.ContainsFunc(res.Resolved, func(f review.FileResult) bool { return f.Resolution != review.KeepMine })) {
		fmt.Fprintf(w, " Undo with: airlock undo %s", id)
	}
	fmt.Fprintln(w)
	if len(res.Conflicts) > 0 {
		fmt.Fprintln(w, "Conflicting files were not changed: apply them again with --resolve PATH=mine|theirs|both, or edit them by hand.")
	}
}

// resolutionWords says what a resolution did.
func resolutionWords(c review.Choice) string {
	switch c {
	case review.KeepMine:
		return "kept your version"
	case review.TakeTheirs:
		return "took the approved change"
	case review.KeepBoth:
		return "kept both sides"
	case review.UseContent:
		return "the merge tool's result"
	}
	return string(c)
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

// displayPath shows a path from the guest on one line: quoted when it
// holds a space, a control or non-printable character.
func displayPath(p string) string {
	for _, r := range p {
		if r == ' ' || !unicode.IsPrint(r) {
			return strconv.Quote(p)
		}
	}
	return p
}

// shellArg is p as a shell argument to copy: as it is when it holds only
// safe characters, else in single quotes (a control or non-printable
// character makes it a Go-quoted string, shown rather than run).
func shellArg(p string) string {
	safe := true
	for _, r := range p {
		switch {
		case !unicode.IsPrint(r):
			return strconv.Quote(p)
		case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-/+@%,:=", r)):
		default:
			safe = false
		}
	}
	if safe && !strings.HasPrefix(p, "-") {
		return p
	}
	if strings.HasPrefix(p, "-") {
		p = "./" + p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}
