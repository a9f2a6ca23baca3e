package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// applyBranch is apply --branch: the approved changes as a commit on a
// new branch, the working tree and index left alone.
func applyBranch(ctx context.Context, e *env, sb *sandbox.Sandbox, cs *review.Changeset, d review.Decisions, sel sandbox.Selection, message, branch string, actions int) error {
	cr, err := promote.Branch(ctx, sb, d, promote.CommitOptions{Message: message, Branch: branch})
	if err != nil {
		return err
	}
	for _, f := range sel.LeftOut(cs) {
		cr.Notes = append(cr.Notes, fmt.Sprintf("%s left out (%s); name it to take it", safetext.Line(f.Path), f.FlagReason(review.FlagHostExec)))
	}
	if actions > 0 {
		cr.Notes = append(cr.Notes, fmt.Sprintf("%d approved %s not sent: actions are sent by an apply to the working tree", actions, plural(actions, "action was", "actions were")))
	}
	if e.json {
		return e.printJSON(map[string]any{"commit": cr})
	}
	printCommit(e, sb.ID, cr)
	return nil
}

// printCommit says what commit was made, if any.
func printCommit(e *env, id string, cr *promote.CommitResult) {
	if cr == nil {
		return
	}
	w := e.stdout
	for _, n := range cr.Notes {
		fmt.Fprintf(w, "note      %s\n", n)
	}
	if cr.Commit == "" {
		return
	}
	where := "on " + cr.Branch
	switch {
	case cr.NewBranch:
		where = fmt.Sprintf("on the new branch %s, from %s; the working tree and index are as they were", cr.Branch, shortID(cr.Parent))
	case cr.Branch == "":
		where = "on a detached HEAD"
	}
	fmt.Fprintf(w, "committed %s %s (%d %s) %s\n", shortID(cr.Commit), shownLine(w, cr.Message.Subject), len(cr.Paths), plural(len(cr.Paths), "path", "paths"), where)
	if cr.NewBranch {
		fmt.Fprintf(w, "Push it for review with: airlock push %s\n", id)
	}
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

const exportLong = `export writes the changes you approve (chosen as for airlock apply: --all,
files or folders, --hunks PATH:N) without touching the project:

  --format patch  a git patch: git apply FILE writes it, binary files
                  included as binary patches;
  --format mbox   one mail as git format-patch writes it: git am FILE makes
                  it a commit, with your git identity as its author, the
                  message apply --commit would write (-m MSG, else the
                  agent's summary) and the trailers Airlock-Sandbox,
                  Airlock-Agent and Airlock-Verify.

It goes to FILE with -o, else to standard output (on a terminal, control
characters in it are shown as escapes; redirect it to get the exact
bytes). Files git cannot show in a patch (a directory's mode) are named on
standard error. With --json it prints {"format", "output", "bytes",
"skipped"} (and the text itself as "patch" without -o).`

// exportFlags are airlock export's flags.
type exportFlags struct {
	all, includeHostExec    bool
	hunks                   []string
	format, output, message string
}

func (f *exportFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.format, "format", promote.FormatPatch, "patch (for git apply) or mbox (for git am)")
	fs.StringVarP(&f.output, "output", "o", "", "write to FILE instead of standard output")
	fs.StringVarP(&f.message, "message", "m", "", "the mbox's commit message (default: the agent's summary)")
	fs.BoolVarP(&f.all, "all", "a", false, "export every change")
	fs.StringArrayVar(&f.hunks, "hunks", nil, "export hunks of a file, PATH:N[,N...] numbered from 1 (repeatable)")
	fs.BoolVar(&f.includeHostExec, "include-host-exec", false, "let --all and folders take files that run on your machine too")
}

func newExportCmd(e *env) *cobra.Command {
	var f exportFlags
	cmd := &cobra.Command{
		Use:   "export ID --format patch|mbox [--all [--include-host-exec] | PATH... | --hunks PATH:N[,N...]] [-o FILE] [-m MSG]",
		Short: "Write the approved changes of a sandbox as a git patch or an mbox for git am",
		Long:  exportLong,
		Example: `  airlock export 3f2a --all --format patch -o agent.patch
  airlock export 3f2a --all --format mbox -o agent.mbox && git am agent.mbox
  airlock export 3f2a src/main.go --hunks README.md:2 --format patch | git apply --check`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd.Context(), e, &f, args[0], args[1:])
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// exported is what an export made: its bytes, where they went ("" for
// standard output) and the files left out.
type exported struct {
	data  []byte
	dest  string
	skips []review.Skip
}

// runExport writes the changes of sandbox id that f and paths select as
// a patch or an mbox.
func runExport(ctx context.Context, e *env, f *exportFlags, id string, paths []string) error {
	if f.format != promote.FormatPatch && f.format != promote.FormatMbox {
		return fmt.Errorf("--format %q: want patch or mbox", f.format)
	}
	sel, err := selectionOf(f.all, paths, f.hunks, f.includeHostExec)
	if err != nil {
		return err
	}
	sb, cs, err := e.openChangeset(ctx, id)
	if err != nil {
		return err
	}
	d, err := sel.Decisions(cs)
	if err != nil {
		return err
	}
	var x exported
	if f.output != "" {
		if x.dest, err = filepath.Abs(f.output); err != nil {
			return err
		}
	}
	if x.data, x.skips, err = promote.Export(ctx, sb, d, f.format, f.message, x.dest); err != nil {
		return err
	}
	for _, lf := range sel.LeftOut(cs) {
		x.skips = append(x.skips, review.Skip{Path: lf.Path, Reason: lf.FlagReason(review.FlagHostExec) + "; name it to take it"})
	}
	if f.output != "" {
		if err := atomicfile.WriteFile(x.dest, x.data, 0o644); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}
	if e.json {
		v := map[string]any{"format": f.format, "output": x.dest, "bytes": len(x.data), "skipped": x.skips}
		if f.output == "" {
			v["patch"] = string(x.data)
		}
		return e.printJSON(v)
	}
	return printExport(e, f, x)
}

// printExport says what was left out, then writes the export to
// standard output or says where it went and how to apply it.
func printExport(e *env, f *exportFlags, x exported) error {
	for _, s := range x.skips {
		e.note("left out %s: %s", safetext.Line(s.Path), s.Reason)
	}
	if f.output == "" {
		_, err := fmt.Fprint(e.stdout, shown(e.stdout, string(x.data)))
		return err
	}
	next := "git apply " + shellArg(f.output)
	if f.format == promote.FormatMbox {
		next = "git am " + shellArg(f.output)
	}
	fmt.Fprintf(e.stdout, "exported  %s (%s, %d bytes). Apply it with: %s\n", f.output, f.format, len(x.data), next)
	return nil
}

func newPushCmd(e *env) *cobra.Command {
	var branch, remote string
	cmd := &cobra.Command{
		Use:   "push ID [--branch NAME] [--remote origin]",
		Short: "Push the branch made from a sandbox and open a pull request",
		Long: `push pushes the branch that airlock apply ID --branch NAME made (or
--branch NAME) to a remote (origin unless --remote) with your own git on
this computer: your credentials, your credential helper, your SSH keys.
None of them is ever given to a VM or to the agent.

When gh (GitHub's command line) is installed, it then opens a pull request
from the branch with the commit's subject as its title and the rest of its
message (the agent's summary and the trailers) and the sandbox's signed
receipt (airlock audit export) as its body, and prints its
URL; without gh it prints where to open one. A gh that fails leaves the
branch pushed and says so.

The sandbox's stage becomes "pushed" (airlock status, airlock ls), and the
push is recorded in its audit log.`,
		Example: `  airlock apply 3f2a --all --branch agent/rate-limit
  airlock push 3f2a
  airlock push 3f2a --remote fork
  airlock push 3f2a --branch agent/rate-limit --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPush(cmd.Context(), e, args[0], promote.PushOptions{Branch: branch, Remote: remote, Stdin: e.stdin, Stderr: e.stderr})
		},
	}
	cmd.Flags().StringVar(&branch, "branch", "", "the branch to push (default: the one airlock apply --branch made)")
	cmd.Flags().StringVar(&remote, "remote", "origin", "the remote to push to")
	return cmd
}

// runPush pushes sandbox id's branch with the user's git and opens a
// pull request where gh can.
func runPush(ctx context.Context, e *env, id string, opts promote.PushOptions) error {
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	res, err := promote.Push(ctx, sb, opts)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	fmt.Fprintf(e.stdout, "pushed    %s (%s) to %s\n", res.Branch, shortID(res.Commit), res.Remote)
	if res.PullRequest != "" {
		fmt.Fprintf(e.stdout, "pull request %s\n", res.PullRequest)
	}
	if res.Hint != "" {
		fmt.Fprintln(e.stdout, res.Hint)
	}
	return nil
}

// stageText is a sandbox's stage for people, with its commit, branch and
// pull request: "pushed: 1a2b3c4d5e6f on agent/x to origin, https://...".
func stageText(m sandbox.Meta) string {
	s := string(m.Stage) + " (sandbox → applied → committed → pushed)"
	p := m.Promotion
	if p == nil {
		return s
	}
	s = fmt.Sprintf("%s: %s", m.Stage, shortID(p.Commit))
	if p.Branch != "" {
		s += " on " + p.Branch
	}
	if p.Remote != "" {
		s += ", pushed to " + p.Remote
	}
	if p.PullRequest != "" {
		s += ", " + p.PullRequest
	}
	return s
}
