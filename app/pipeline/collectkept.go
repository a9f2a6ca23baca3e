package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// CollectOptions is how the workspace of a sandbox whose VM still runs
// (airlock run --keep) is collected again.
type CollectOptions struct {
	// Launch attaches to the kept VM (its Home and Name, the sandbox's
	// ID; BootTimeout bounds the attach).
	Launch launch.Options
	// Limits and Excludes are the run's: the same caps and rules of the
	// walk as the run's own collect.
	Limits   manifest.Limits
	Excludes []string
	// Transfer pulls the changed files; nil means the default.
	Transfer Transfer
	// Cause names what asked for the collect, for the audit log (an MCP
	// tool call, a command).
	Cause    string
	Progress func(Progress)
	Logger   *slog.Logger
}

// ErrReviewed means a sandbox's changes were applied already: collecting
// its VM's workspace again would change what was reviewed underneath.
var ErrReviewed = errors.New("its changes were applied already")

// Collect reads the workspace of sb's kept VM as the end of a run does
// (the guest's listing validated as hostile input, the changed files
// pulled into the content store verified) and makes it the sandbox's
// changes: what commands run in the VM since (airlock exec ID, an MCP
// tool) did becomes reviewable. The VM runs on. It returns the new
// changes' counts.
func Collect(ctx context.Context, s *sandbox.Store, sb *sandbox.Sandbox, o CollectOptions) (sandbox.ChangeStats, error) {
	st, err := collectKept(ctx, s, sb, o)
	if err != nil {
		return st, fmt.Errorf("collect %s: %w", sb.ID, err)
	}
	return st, nil
}

func collectKept(ctx context.Context, s *sandbox.Store, sb *sandbox.Sandbox, o CollectOptions) (sandbox.ChangeStats, error) {
	var st sandbox.ChangeStats
	meta, err := sb.Meta()
	if err != nil {
		return st, err
	}
	if meta.Stage != "" && meta.Stage != sandbox.StageSandbox {
		return st, fmt.Errorf("%w (%s)", ErrReviewed, meta.Stage)
	}
	if sb.Live() {
		return st, fmt.Errorf("a run of it is still going: %w", sandbox.ErrRunning)
	}
	// A checkpoint or a rollback swaps the VM and guest.json: one at a time.
	unlock, err := lockCheckpoints(sb)
	if err != nil {
		return st, err
	}
	defer unlock()
	base, err := sb.ReadManifest(sandbox.BaselineFile, true)
	if err != nil {
		return st, err
	}
	g, err := launch.Attach(ctx, o.Launch)
	if err != nil {
		return st, fmt.Errorf("%w: %w", sandbox.ErrNoVM, err)
	}
	defer g.Client.Close()

	r := &runner{s: s, sb: sb, base: base, res: &RunResult{Sandbox: sb}, progress: o.Progress, log: o.Logger}
	r.o.Limits, r.o.Excludes, r.o.Transfer = o.Limits, o.Excludes, o.Transfer
	if r.o.Transfer == nil {
		r.o.Transfer = DefaultTransfer()
	}
	if r.progress == nil {
		r.progress = func(Progress) {}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	tr := r.o.Transfer
	if meta.SyncMode == sandbox.SyncDisk {
		// The whole merged tree, listed from the overlay's upper layer.
		tr = overlayTransfer{Transfer: tr, dirs: transfer.OverlayDirs{
			Lower: guest.OverlayLower(sandbox.Workspace), Upper: guest.OverlayUpper(sandbox.Workspace)}}
	}
	t := time.Now()
	r.progress(Progress{Step: StepCollect, Sandbox: sb.ID, Message: "collecting"})
	if err := r.collect(ctx, tr, GuestMachine(g), base, transfer.Known{}); err != nil {
		return st, err
	}
	collectMS := time.Since(t).Milliseconds()
	cs, err := sb.ChangesetOf(ctx, r.changes)
	if err != nil {
		return st, err
	}
	st = sandbox.StatsOf(cs)
	if _, err := sb.Update(func(mt *sandbox.Meta) {
		mt.Guest, mt.Changes, mt.Timings.CollectMS = sandbox.GuestFile, &st, collectMS
		if mt.Status == sandbox.StatusCollecting {
			mt.Status = sandbox.StatusReady
		}
	}); err != nil {
		return st, err
	}
	data := map[string]any{"changes": st, "collect_ms": collectMS, "kept": true}
	if o.Cause != "" {
		data["cause"] = o.Cause
	}
	if fl := flaggedPaths(cs); len(fl) > 0 {
		data["flagged"] = fl
	}
	return st, sb.Audit(sandbox.Event{Event: sandbox.EventCollected, Data: data})
}
