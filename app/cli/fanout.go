package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/lockio"
)

// fanOutResult is what `airlock run --fan-out N --json` prints.
type fanOutResult struct {
	Group    string      `json:"group"`
	Attempts []runResult `json:"attempts"`
}

// runFanOut runs the plan's attempts from one baseline, at most its
// Parallel at once, each attempt's output prefixed with its number, then
// compares them. errw is the one writer of everything on stderr (the
// proxies' request lines too). The exit code is 0 when every attempt ran
// and exited 0, else 1 (or ExitError when Airlock itself failed for every
// one).
func runFanOut(ctx context.Context, e *env, store *sandbox.Store, pn *plan.Plan, errw *lockio.Writer) error {
	opts, lim := pn.Runs, pn.Limits
	n := len(opts)
	out := lockio.NewWriter(e.stdout)
	// The runs' progress notes come from several goroutines at once.
	defer func(w io.Writer) { e.stderr = w }(e.stderr)
	e.stderr = errw
	var flush []func()
	for i := range opts {
		o := &opts[i]
		k := i + 1
		who := ""
		if o.Agent != "" {
			who = " (" + o.Agent + ")"
		}
		o.Stdin = nil
		if e.json {
			o.Stdout, o.Stderr = nil, nil
		} else {
			so, se := &prefixWriter{w: out, prefix: fmt.Sprintf("[%d] ", k)}, &prefixWriter{w: errw, prefix: fmt.Sprintf("[%d] ", k)}
			o.Stdout, o.Stderr = so, se
			flush = append(flush, so.Flush, se.Flush)
		}
		o.Progress = func(ev pipeline.Progress) {
			switch ev.Step {
			case pipeline.StepSnapshot:
				if ev.Total == 0 {
					e.note("%s (once, for %d attempts)", ev.Message, n)
				}
			case pipeline.StepCreated:
				e.note("[%d] sandbox %s%s", k, ev.Sandbox, who)
			case pipeline.StepBoot, pipeline.StepRun:
				e.note("[%d] %s", k, ev.Message)
			case pipeline.StepReady:
				e.note("[%d] ready for review", k)
			}
		}
	}
	done, err := pipeline.Execute(ctx, store, pn.Job)
	group, attempts := done.Group, done.Attempts
	for _, f := range flush {
		f()
	}
	if err != nil {
		return err
	}
	failed, nonZero := 0, 0
	res := fanOutResult{Group: group}
	var ids []string
	for _, a := range attempts {
		if a.Err != nil {
			failed++
		}
		r := runResult{Status: sandbox.StatusFailed, Excluded: nil, Limits: lim, Network: sandbox.NetworkNone}
		if a.Result != nil {
			m := a.Result.Meta
			r = runResult{Sandbox: a.Result.Sandbox.ID, Status: m.Status, SyncMode: m.SyncMode, ExitCode: a.Result.ExitCode,
				Changes: m.Changes, Summary: a.Result.Summary, Timings: m.Timings, Network: m.Network, Limits: lim, Verify: m.Verify}
			ids = append(ids, a.Result.Sandbox.ID)
			if a.Result.ExitCode != 0 {
				nonZero++
			}
		}
		if a.Err != nil {
			r.Error = a.Err.Error()
		}
		res.Attempts = append(res.Attempts, r)
	}
	switch {
	case failed == n:
		e.exitCode = ExitError
	case failed > 0 || nonZero > 0:
		e.exitCode = 1
	}
	if e.json {
		return e.printJSON(res)
	}
	for i, a := range attempts {
		if a.Err != nil {
			fmt.Fprintf(e.stderr, "airlock: attempt %d failed: %v\n", i+1, a.Err)
		}
	}
	fmt.Fprintf(e.stdout, "\nfan-out %s: %d attempts from one baseline\n", group, n)
	cmp, err := store.Compare([]string{group})
	if err != nil {
		return err
	}
	writeCompare(e.stdout, cmp)
	fmt.Fprintf(e.stdout, "\nPick one: airlock diff ID, then airlock apply ID --all (airlock compare %s shows this again).\n", group)
	return nil
}

// writeCompare prints sandboxes side by side: attempt, ID, status, exit
// code, files and lines changed, and the first line of the rationale.
func writeCompare(w io.Writer, rows []sandbox.Comparison) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(sandbox.CompareHeader, "\t"))
	for _, c := range rows {
		cells := c.Cells()
		cells[len(cells)-1] = clip(cells[len(cells)-1], 60)
		for i := range cells {
			cells[i] = shownLine(w, cells[i]) // the rationale came from the guest
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

func newCompareCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "compare ID...",
		Short: "Compare sandboxes side by side: status, exit code, files and lines changed, rationale",
		Long: `compare shows sandboxes side by side, to pick the best of several attempts:
per sandbox its attempt number, status, the command's exit code, files and
lines changed, and the first line of the agent's summary. An ID may be a
sandbox's (any unique prefix) or the group ID that airlock run --fan-out
printed, which stands for every attempt of that run.

Then review the one you pick with airlock diff ID and apply it (or some of
its hunks) with airlock apply. To take hunks from several attempts, apply
them one attempt after another: the attempts share one baseline, so each
apply after the first merges onto what you already applied (three-way),
and a real conflict is shown, never overwritten.`,
		Example: `  airlock compare 9c1e04aa          # every attempt of a fan-out
  airlock compare 3f2a 77b0 --json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := e.sandboxes()
			if err != nil {
				return err
			}
			rows, err := st.Compare(args)
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(rows)
			}
			writeCompare(e.stdout, rows)
			return nil
		},
	}
}

// prefixWriter writes whole lines to w, each after prefix; a partial last
// line waits for its end or Flush.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    bytes.Buffer
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Write(b)
	for {
		line, err := p.buf.ReadString('\n')
		if err != nil { // no newline yet: keep the rest
			p.buf.Reset()
			p.buf.WriteString(line)
			return len(b), nil
		}
		if _, err := io.WriteString(p.w, p.prefix+line); err != nil {
			return len(b), err
		}
	}
}

// Flush writes a partial last line.
func (p *prefixWriter) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf.Len() > 0 {
		io.WriteString(p.w, p.prefix+strings.TrimRight(p.buf.String(), "\n")+"\n")
		p.buf.Reset()
	}
}
