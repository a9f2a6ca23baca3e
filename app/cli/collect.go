package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/internal/lockio"
)

func newCollectCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "collect ID",
		Short: "Make what a kept sandbox's VM now holds in /workspace the sandbox's changes",
		Long: `collect reads /workspace of a sandbox whose VM still runs (airlock run
--keep) as the end of a run does, so that what commands run in it since
(airlock exec ID) did is what airlock diff, apply and the app review. The
VM runs on; collect again after more commands. A sandbox whose changes were
applied is not collected again.`,
		Example: `  airlock run --keep --project . -- make setup
  airlock exec 3f2a -- make fix
  airlock collect 3f2a
  airlock diff 3f2a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCollect(cmd.Context(), e, args[0])
		},
	}
}

func runCollect(ctx context.Context, e *env, id string) error {
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	m, err := sb.Meta()
	if err != nil {
		return err
	}
	proj, err := config.Load(m.Project)
	if err != nil {
		return err
	}
	pl, err := e.openPlanner(lockio.NewWriter(e.stderr))
	if err != nil {
		return err
	}
	pn, err := pl.Exec(ctx, plan.ExecRequest{Sandbox: sb.ID})
	if err != nil {
		return err
	}
	p := e.newProgress()
	st, err := pipeline.Collect(ctx, sb.Store(), sb, pipeline.CollectOptions{Launch: pn.Launch, Limits: plan.ManifestLimits(pn.Limits),
		Excludes: proj.Exclude, Cause: "airlock collect", Progress: func(ev pipeline.Progress) { p.Step(ev.Message) }})
	p.Done("")
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(map[string]any{"sandbox": sb.ID, "changes": st})
	}
	fmt.Fprintf(e.stdout, "collected %s: %s\n", sb.ID, describeStats(&st))
	return nil
}
