package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/heldreq"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/lockio"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

const actionsLong = `actions lists the staged actions of a sandbox: requests its agent made to an
API that a [[network.stage]] entry of your configuration holds (a comment
on an issue, a message to a chat, a mail). The agent got an answer at once,
but nothing left this computer. Each is shown with a sentence saying what it
would do, its method and URL, and where it stands: held, approved,
rejected, sent (with the answer's status), or "may have been sent" (an
apply was cut short while sending it: it is never sent again).

Name actions by number to see them whole (headers, the headers left out as
credentials, and the body). --approve and --reject record your verdict, as
the desktop app's Approve and Reject do; --undecide takes it back.
airlock apply sends the approved actions that were never sent, from this
computer, in the order they were made, with your real credential where
the agent had its placeholder; airlock undo cannot unsend them.

With --json the actions are printed whole (the body base64), with their
verdicts and the record of their sending.`

// actionsFlags are airlock actions' flags: the verdicts to record.
type actionsFlags struct {
	approve, reject, undecide []string
}

// verdicts are the flags' verdicts by action number; an action given two
// is refused.
func (f *actionsFlags) verdicts() (map[int]review.Verdict, error) {
	verdicts := map[int]review.Verdict{}
	for _, fl := range []struct {
		list []string
		v    review.Verdict
		name string
	}{{f.approve, review.Approve, "--approve"}, {f.reject, review.Reject, "--reject"}, {f.undecide, review.Undecided, "--undecide"}} {
		ids, err := actionNumbers(fl.list)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fl.name, err)
		}
		for _, id := range ids {
			if v, ok := verdicts[id]; ok && v != fl.v {
				return nil, fmt.Errorf("action %d is given two verdicts", id)
			}
			verdicts[id] = fl.v
		}
	}
	return verdicts, nil
}

func newActionsCmd(e *env) *cobra.Command {
	var f actionsFlags
	cmd := &cobra.Command{
		Use:   "actions ID [N...] [--approve N[,N...]] [--reject N[,N...]] [--undecide N[,N...]]",
		Short: "List, show and decide the requests a sandbox's agent made that were held for review",
		Long:  actionsLong,
		Example: `  airlock actions 3f2a
  airlock actions 3f2a 2
  airlock actions 3f2a --approve 1,2 --reject 3
  airlock apply 3f2a --dry-run`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runActions(cmd.Context(), e, &f, args[0], args[1:])
		},
	}
	cmd.Flags().StringArrayVar(&f.approve, "approve", nil, "approve actions N[,N...] (repeatable): airlock apply sends them")
	cmd.Flags().StringArrayVar(&f.reject, "reject", nil, "reject actions N[,N...] (repeatable): they are never sent")
	cmd.Flags().StringArrayVar(&f.undecide, "undecide", nil, "take back the verdict on actions N[,N...] (repeatable)")
	return cmd
}

// runActions records f's verdicts on sandbox id's held actions, then
// lists them, or shows whole the ones numbered in args.
func runActions(ctx context.Context, e *env, f *actionsFlags, id string, args []string) error {
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	show, err := actionNumbers(args)
	if err != nil {
		return err
	}
	verdicts, err := f.verdicts()
	if err != nil {
		return err
	}
	if len(verdicts) > 0 {
		if err := decideActions(ctx, sb, verdicts); err != nil {
			return err
		}
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		return err
	}
	views, err := sb.ActionViews(d)
	if err != nil {
		return err
	}
	if len(show) > 0 {
		var keep []sandbox.ActionView
		for _, n := range show {
			i := slices.IndexFunc(views, func(v sandbox.ActionView) bool { return v.ID == n })
			if i < 0 {
				_, err := sb.Action(n)
				return err
			}
			keep = append(keep, views[i])
		}
		views = keep
	}
	if e.json {
		if views == nil {
			views = []sandbox.ActionView{}
		}
		return e.printJSON(views)
	}
	printActions(e.stdout, sb.ID, views, len(show) > 0)
	return nil
}

// printActions writes views for people: whole when they were named, else
// as a list with what to do next.
func printActions(w io.Writer, id string, views []sandbox.ActionView, whole bool) {
	switch {
	case len(views) == 0:
		fmt.Fprintf(w, "%s has no held actions: its agent made no request that a [[network.stage]] entry holds.\n", id)
	case whole:
		for i, v := range views {
			if i > 0 {
				fmt.Fprintln(w)
			}
			writeActionWhole(w, v)
		}
	default:
		writeActionList(w, views)
		fmt.Fprintf(w, "\nSee one whole with: airlock actions %s N. Decide with --approve N or --reject N; airlock apply %s sends the approved ones.\n", id, id)
	}
}

// actionNumbers reads action numbers given as N, N,M or several
// arguments.
func actionNumbers(args []string) ([]int, error) {
	var out []int
	for _, a := range args {
		for _, s := range strings.Split(a, ",") {
			s = strings.TrimPrefix(strings.TrimSpace(s), "#")
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%q is not an action number (1, 2, …; airlock actions ID lists them)", s)
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// decideActions records verdicts on actions in the saved review; an
// action that was sent (or may have been) keeps its verdict.
func decideActions(ctx context.Context, sb *sandbox.Sandbox, verdicts map[int]review.Verdict) error {
	j, err := sb.SendJournal()
	if err != nil {
		return err
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		return err
	}
	if d.Actions == nil {
		d.Actions = map[int]review.Verdict{}
	}
	for _, id := range slices.Sorted(maps.Keys(verdicts)) {
		if _, err := sb.Action(id); err != nil {
			return err
		}
		if st := j[id].State; st != sandbox.NotSent {
			return fmt.Errorf("action %d was already sent (or may have been): its verdict stays", id)
		}
		if v := verdicts[id]; v == review.Undecided {
			delete(d.Actions, id)
		} else {
			d.Actions[id] = v
		}
	}
	return sb.SaveDecisions(d)
}

// writeActionList writes one line per action: number, state, sentence,
// and method and URL under it.
func writeActionList(w io.Writer, views []sandbox.ActionView) {
	for _, v := range views {
		state := v.State()
		if v.Send != nil && v.Send.Status != 0 {
			state += fmt.Sprintf(" (%d %s)", v.Send.Status, http.StatusText(v.Send.Status))
		}
		fmt.Fprintf(w, "#%-3d %-9s %s\n", v.ID, state, heldreq.Describe(v.Held))
		fmt.Fprintf(w, "     %s %s", safetext.Line(safetext.Cut(v.Method, 20)), safetext.Line(safetext.Cut(v.URL(), 200)))
		if len(v.Body) > 0 {
			fmt.Fprintf(w, " (%s body)", bytesize.Format(int64(len(v.Body))))
		}
		fmt.Fprintf(w, ", round %d\n", v.Round)
	}
}

// writeActionWhole writes an action as a person reads it before saying
// yes: sentence, request line, headers, what was left out, and body.
func writeActionWhole(w io.Writer, v sandbox.ActionView) {
	fmt.Fprintf(w, "Action #%d (%s): %s\n", v.ID, v.State(), heldreq.Describe(v.Held))
	fmt.Fprintf(w, "  %s %s\n", safetext.Line(v.Method), safetext.Line(v.URL()))
	fmt.Fprintf(w, "  made by round %d's agent at %s, held by the stage %s\n", v.Round, v.Time.Local().Format("2006-01-02 15:04:05"), safetext.Line(v.Rule))
	for _, k := range slices.Sorted(maps.Keys(v.Header)) {
		for _, val := range v.Header[k] {
			fmt.Fprintf(w, "  %s: %s\n", safetext.Line(k), safetext.Line(val))
		}
	}
	if v.Secret != nil {
		fmt.Fprintf(w, "  %s: your %s is put here when it is sent (the agent had only a placeholder)\n", safetext.Line(v.Secret.Header), safetext.Line(v.Secret.Name))
	}
	if len(v.Dropped) > 0 {
		fmt.Fprintf(w, "  left out as credentials, never sent: %s\n", safetext.Line(strings.Join(v.Dropped, ", ")))
	}
	if body := heldreq.PrettyBody(v.Held, 64<<10); body != "" {
		fmt.Fprintln(w)
		for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			fmt.Fprintln(w, "  "+l)
		}
	}
	if s := v.Send; s != nil {
		fmt.Fprintln(w)
		switch {
		case s.State == sandbox.Sent:
			fmt.Fprintf(w, "  sent at %s: %d %s\n", s.Time.Local().Format("2006-01-02 15:04:05"), s.Status, http.StatusText(s.Status))
			writeIndented(w, []byte(safetext.Text(string(s.Body))), 20)
		case s.State == sandbox.Sending:
			fmt.Fprintf(w, "  an apply started sending it at %s and did not record an answer (%s): it may have arrived, and is never sent again\n", s.Time.Local().Format("2006-01-02 15:04:05"), safetext.Line(orNone(s.Error)))
		case s.Error != "":
			fmt.Fprintf(w, "  not sent: %s\n", safetext.Line(s.Error))
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "the apply ended"
	}
	return s
}

// actionsToSend is what an apply sends: the actions approved in the saved
// review and those named by --send (approved now, unless dry), never sent
// yet.
func actionsToSend(ctx context.Context, e *env, sb *sandbox.Sandbox, send []string, dry bool) ([]sandbox.Action, error) {
	named, err := actionNumbers(send)
	if err != nil {
		return nil, fmt.Errorf("--send: %w", err)
	}
	if len(named) > 0 {
		j, err := sb.SendJournal()
		if err != nil {
			return nil, err
		}
		v := map[int]review.Verdict{}
		for _, id := range named {
			switch j[id].State {
			case sandbox.Sent:
				e.note("action %d was already sent; it is not sent again", id)
			case sandbox.Sending:
				e.note("action %d may have been sent by an apply that was cut short; it is never sent again", id)
			default:
				v[id] = review.Approve
			}
		}
		if dry {
			for id := range v {
				if _, err := sb.Action(id); err != nil {
					return nil, fmt.Errorf("--send: %w", err)
				}
			}
		} else if err := decideActions(ctx, sb, v); err != nil {
			return nil, fmt.Errorf("--send: %w", err)
		}
		named = slices.Collect(maps.Keys(v))
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		return nil, err
	}
	approved := sandbox.Approved(d)
	if dry {
		approved = append(approved, named...)
		slices.Sort(approved)
		approved = slices.Compact(approved)
	}
	ids, err := sb.Unsent(approved)
	if err != nil {
		return nil, err
	}
	var out []sandbox.Action
	for _, id := range ids {
		a, err := sb.Action(id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// sendActions sends actions from this computer after saying that undo
// cannot unsend them, and prints each result.
func sendActions(ctx context.Context, e *env, sb *sandbox.Sandbox, actions []sandbox.Action) ([]sandbox.ActionResult, error) {
	if len(actions) == 0 {
		return nil, nil
	}
	pl, err := e.openPlanner(lockio.NewWriter(e.stderr))
	if err != nil {
		return nil, err
	}
	send, err := pl.Sender()
	if err != nil {
		return nil, err
	}
	w := e.stdout
	if e.json {
		w = e.stderr
	}
	fmt.Fprintf(w, "Sending %d %s from this computer, in the order the agent made them. airlock undo cannot unsend them.\n", len(actions), plural(len(actions), "action", "actions"))
	ids := make([]int, len(actions))
	for i, a := range actions {
		ids[i] = a.ID
	}
	res, err := sb.SendActions(ctx, ids, send, func(r sandbox.ActionResult) {
		fmt.Fprintln(w, actionResultLine(r))
	})
	if err != nil {
		return res, err
	}
	if i := slices.IndexFunc(res, func(r sandbox.ActionResult) bool { return r.Error != "" }); i >= 0 {
		left := len(ids) - len(res)
		fmt.Fprintf(w, "Sending stopped at action %d", res[i].ID)
		if left > 0 {
			fmt.Fprintf(w, "; %d later %s not sent, so that none overtakes it", left, plural(left, "action was", "actions were"))
		}
		switch res[i].State {
		case sandbox.Sending:
			fmt.Fprintf(w, ". Action %d may have arrived: check on the service's side; Airlock never sends it again.\n", res[i].ID)
		default:
			fmt.Fprintf(w, ". Nothing of action %d left this computer: mend the cause and run airlock apply %s again to send the rest.\n", res[i].ID, sb.ID)
		}
		e.exitCode = 1
	}
	return res, nil
}

// actionResultLine is one sent action for people.
func actionResultLine(r sandbox.ActionResult) string {
	target := safetext.Line(r.Method + " " + r.URL)
	switch {
	case r.Already && r.State == sandbox.Sent:
		return fmt.Sprintf("already   #%d %s → %d (sent by an earlier apply; not sent again)", r.ID, target, r.Status)
	case r.Already:
		return fmt.Sprintf("unsure    #%d %s: an earlier apply was cut short while sending it; it may have arrived and is not sent again", r.ID, target)
	case r.State == sandbox.Sent && r.Status >= 400:
		return fmt.Sprintf("sent      #%d %s → %d %s: the service refused it: %s", r.ID, target, r.Status, http.StatusText(r.Status), safetext.Line(answerStart(string(r.Body), 200)))
	case r.State == sandbox.Sent:
		return fmt.Sprintf("sent      #%d %s → %d %s", r.ID, target, r.Status, http.StatusText(r.Status))
	case r.State == sandbox.Sending:
		return fmt.Sprintf("UNSURE    #%d %s: %s (it may have arrived)", r.ID, target, safetext.Line(r.Error))
	}
	return fmt.Sprintf("NOT SENT  #%d %s: %s", r.ID, target, safetext.Line(r.Error))
}

func answerStart(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return safetext.Cut(s, n)
}

// writeActionsSection is what airlock diff prints after the patch: each
// held action, on lines git apply ignores ("# ").
func writeActionsSection(w io.Writer, views []sandbox.ActionView, id string) {
	if len(views) == 0 {
		return
	}
	fmt.Fprintf(w, "\n# airlock: %d %s held for review (not sent; airlock actions %s shows them whole):\n", len(views), plural(len(views), "action", "actions"), id)
	var b strings.Builder
	writeActionList(&b, views)
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintln(w, "# "+l)
	}
}
