package pipeline

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// replyRound sends a reviewed sandbox back to its agent for another round: a
// fresh VM gets the sandbox's current tree (the baseline plus every
// change so far), o.Command runs with the reply prompt in its
// environment (AIRLOCK_REPLY, AIRLOCK_ROUND; the planner puts it in an
// agent preset's continue command), and its changes are collected. The
// review then shows the total against the baseline, and RoundChangeset
// what this round changed. The previous round is kept in rounds/N/. o is
// planned for this sandbox (app/plan: its project, sync mode, verify, and
// its first round's command unless an agent continues); its Baseline,
// Group and Attempt are ignored.
func replyRound(ctx context.Context, s *sandbox.Store, id, message string, reply *sandbox.Reply, o RunOptions) (*RunResult, error) {
	if strings.TrimSpace(message) == "" {
		return nil, errors.New("reply: say what the agent should do differently (--message)")
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("reply: %w", err)
	}
	sb, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	release, err := sb.Hold()
	if err != nil {
		return nil, err
	}
	defer release()
	meta, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	if meta.Status != sandbox.StatusReady && meta.Status != sandbox.StatusApplied {
		return nil, fmt.Errorf("reply to %s: it is %s; only a sandbox ready for review can be sent back", sb.ID, meta.Status)
	}
	if meta.Project != o.Project {
		return nil, fmt.Errorf("reply to %s: the plan is for %s, the sandbox's project is %s", sb.ID, o.Project, meta.Project)
	}
	if meta.SyncMode == sandbox.SyncVirtiofs {
		return nil, fmt.Errorf("reply to %s: a virtiofs sandbox cannot be continued yet; start a new run", sb.ID)
	}
	if reply == nil {
		if reply, err = sb.PrepareReply(ctx, message); err != nil {
			return nil, err
		}
	}
	prompt := reply.Prompt
	start, err := sb.ReadManifest(sandbox.GuestFile, false)
	if err != nil {
		return nil, err
	}
	start = sandbox.WithoutMeta(start)
	round := max(meta.Round, 1)
	if err := sb.KeepRound(round); err != nil {
		return nil, err
	}
	next := filepath.Join(sb.Path(sandbox.RoundsDir), strconv.Itoa(round+1))
	if err := os.MkdirAll(next, 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(next, sandbox.PromptFile), []byte(prompt), 0o600); err != nil {
		return nil, err
	}
	o.Baseline, o.Group, o.Attempt = nil, "", 0
	o.Env = maps.Clone(o.Env)
	if o.Env == nil {
		o.Env = map[string]string{}
	}
	o.Env["AIRLOCK_REPLY"], o.Env["AIRLOCK_ROUND"] = prompt, strconv.Itoa(round+1)
	if o.Transfer == nil {
		o.Transfer = DefaultTransfer()
	}
	r := &runner{s: s, o: o, project: o.Project, progress: o.Progress, log: o.Logger, sb: sb, base: start, round: true}
	if r.progress == nil {
		r.progress = func(Progress) {}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	// The comments are sent once the agent has them: when its command
	// starts. A round that fails before leaves them to the next reply.
	progress, marked := r.progress, false
	r.progress = func(p Progress) {
		if p.Step == StepRun && !marked {
			marked = true
			if err := sb.MarkSent(round+1, reply.Feedback.Comments); err != nil {
				r.log.Warn("mark the comments sent", "sandbox", sb.ID, "err", err)
			}
		}
		progress(p)
	}
	r.res = &RunResult{Sandbox: sb}
	if _, err := sb.Update(func(m *sandbox.Meta) {
		m.Round, m.Verify, m.ExitCode, m.Error = round+1, nil, nil, ""
		if o.Script != nil {
			m.Command = o.Command
		}
	}); err != nil {
		return nil, err
	}
	_ = os.Remove(sb.Path(sandbox.SummaryFile))
	_ = os.Remove(sb.Path(sandbox.FinalFile))
	_ = os.Remove(sb.Path(sandbox.VerifyFile))
	if err := sb.Audit(sandbox.Event{Event: sandbox.EventReply, Data: map[string]any{"round": round + 1, "message": message, "prompt_sha256": fmt.Sprintf("%x", sha256.Sum256([]byte(prompt)))}}); err != nil {
		return nil, err
	}
	r.progress(Progress{Step: StepCreated, Sandbox: sb.ID, Message: fmt.Sprintf("round %d", round+1)})
	report := &manifest.Report{}
	for _, e := range start.Entries {
		switch e.Type {
		case manifest.File:
			report.Files++
			report.Bytes += e.Size
		case manifest.Symlink:
			report.Symlinks++
		case manifest.Dir:
			report.Dirs++
		}
	}
	return r.finish(ctx, time.Now(), r.session(ctx, start, report))
}
