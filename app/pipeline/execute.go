package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// Job is a planned run as the executor carries it out: one attempt, a
// reply round of a sandbox, or several attempts from one baseline (a
// fan-out). The planner (app/plan) makes it, every decision taken; the
// caller adds only how each run shows itself (RunOptions.Hooks' input,
// output and progress).
type Job struct {
	// Runs are the attempts; a reply round has one.
	Runs []RunOptions
	// Parallel bounds how many attempts run at once (0: all).
	Parallel int
	// Reply and Message make the job a reply round of that sandbox;
	// Round is its prompt and the feedback it carries, as the planner
	// prepared them (nil: prepared when the round starts).
	Reply, Message string
	Round          *sandbox.Reply
}

// FanOut says whether the job is several attempts from one baseline.
func (j Job) FanOut() bool { return len(j.Runs) > 1 }

// Outcome is what a job left: one Attempt per run (a sandbox, or the
// error that kept it from being made) and, for a fan-out, its group.
type Outcome struct {
	Group    string
	Attempts []Attempt
}

// Result is the sandbox a job of one run (or a reply round) made, nil if
// none was made or the job was a fan-out.
func (o Outcome) Result() *RunResult {
	if len(o.Attempts) != 1 {
		return nil
	}
	return o.Attempts[0].Result
}

// Execute carries out a job: a reply round (replyRound), the attempts of
// a fan-out from one baseline (fanOut), or the one run (runOnce). It is the one way a
// planned run starts, whether the CLI, the app or any other front end
// asked for it. The error is the job's: for one attempt, that attempt's
// (its sandbox, if one was made, is in the outcome); for a fan-out, only
// what stopped every attempt (each attempt's own is in its Attempt).
func Execute(ctx context.Context, s *sandbox.Store, j Job) (Outcome, error) {
	switch {
	case len(j.Runs) == 0:
		return Outcome{}, errors.New("execute: the plan has no runs")
	case j.Reply != "":
		if len(j.Runs) != 1 {
			return Outcome{}, fmt.Errorf("execute: a reply round is one run, the plan has %d", len(j.Runs))
		}
		res, err := replyRound(ctx, s, j.Reply, j.Message, j.Round, j.Runs[0])
		return Outcome{Attempts: []Attempt{{Result: res, Err: err}}}, err
	case j.FanOut():
		group, attempts, err := fanOut(ctx, s, j.Runs, j.Parallel)
		return Outcome{Group: group, Attempts: attempts}, err
	default:
		res, err := runOnce(ctx, s, j.Runs[0])
		return Outcome{Attempts: []Attempt{{Result: res, Err: err}}}, err
	}
}

// check refuses a run whose plan is not complete: these are the
// contract's invariants, which the planner guarantees, not decisions.
func (o RunOptions) check() error {
	switch {
	case o.Boot == nil:
		return errors.New("no way to boot a machine")
	case len(o.Command) == 0 && o.Script == nil:
		return errors.New("no command given")
	case !filepath.IsAbs(o.Project):
		return fmt.Errorf("the project %q is not an absolute path", o.Project)
	case !slices.Contains(sandbox.SyncModes, o.Sync):
		return fmt.Errorf("the plan's sync mode %q is none of %v", o.Sync, sandbox.SyncModes)
	case o.Keep && (o.Sync == sandbox.SyncVirtiofs || o.DiskSize <= 0):
		return errors.New("a kept VM needs the copy or disk sync mode with a workspace disk")
	case o.Sync == sandbox.SyncDisk && (o.DiskSize <= 0 || o.BaseDisks == ""):
		return errors.New("the disk sync mode needs a workspace disk and a directory of baseline disks")
	}
	return nil
}
