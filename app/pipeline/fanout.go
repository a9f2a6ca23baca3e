package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// MaxFanOut bounds how many attempts one fan-out may start.
const MaxFanOut = 16

// Attempt is one run of a fan-out: its result (nil if no sandbox was
// made) and its error.
type Attempt struct {
	Result *RunResult
	Err    error
}

// fanOut runs several attempts on one project from one baseline: the
// project is snapshotted once, then every RunOptions in runs (all of the
// same project) runs in its own sandbox and VM, at most parallel at once
// (0: all at once). Each sandbox records the group's ID and its attempt
// number, and its command sees AIRLOCK_GROUP and AIRLOCK_ATTEMPT. A
// failed attempt does not stop the others; the error returned is only
// for what stops them all (no runs, a bad project, the snapshot).
func fanOut(ctx context.Context, s *sandbox.Store, runs []RunOptions, parallel int) (group string, _ []Attempt, _ error) {
	if len(runs) == 0 {
		return "", nil, errors.New("fan-out: no runs")
	}
	if len(runs) > MaxFanOut {
		return "", nil, fmt.Errorf("fan-out: %d attempts asked, at most %d", len(runs), MaxFanOut)
	}
	project := runs[0].Project
	for _, o := range runs {
		if err := o.check(); err != nil {
			return "", nil, fmt.Errorf("fan-out: %w", err)
		}
		if o.Project != project || !slices.Equal(o.Excludes, runs[0].Excludes) {
			return "", nil, fmt.Errorf("fan-out: every attempt must run on one project with one snapshot (%s and %s)", project, o.Project)
		}
	}
	base, err := Snapshot(ctx, s, project, runs[0].Excludes, runs[0].Progress, runs[0].Logger)
	if err != nil {
		return "", nil, err
	}
	group, err = sandbox.NewID()
	if err != nil {
		return "", nil, err
	}
	if parallel <= 0 || parallel > len(runs) {
		parallel = len(runs)
	}
	out := make([]Attempt, len(runs))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, o := range runs {
		o.Project, o.Baseline, o.Group, o.Attempt = project, base, group, i+1
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				out[i].Err = ctx.Err()
				return
			}
			defer func() { <-slots }()
			out[i].Result, out[i].Err = runOnce(ctx, s, o)
		})
	}
	wg.Wait()
	return group, out, nil
}
