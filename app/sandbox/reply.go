package sandbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// RoundsDir keeps each finished round of a sandbox (rounds/N/: its
// guest manifest, summary, final message and verify output) once a reply starts the
// next one; the sandbox's own files are always the latest round.
const RoundsDir = "rounds"

// EventReply records that the user sent a sandbox back to its agent.
const EventReply EventKind = "reply"

// ReplyPrompt is what the agent is told in the next round: the user's
// message, then their comments on files and hunks and the hunks they
// rejected, each with its place in the file, from the review kept with
// the sandbox.
func (sb *Sandbox) ReplyPrompt(ctx context.Context, message string) (string, error) {
	cs, err := sb.Changeset(ctx)
	if err != nil {
		return "", err
	}
	d, err := sb.Decisions()
	if err != nil {
		return "", err
	}
	return replyPrompt(message, cs, d), nil
}

func replyPrompt(message string, cs *review.Changeset, d review.Decisions) string {
	var b strings.Builder
	b.WriteString("The reviewer sent your changes back with this message:\n\n")
	b.WriteString(strings.TrimSpace(message))
	b.WriteString("\n")
	var notes []string
	for _, f := range cs.Files {
		fd, ok := d.Files[f.Path]
		if !ok {
			continue
		}
		if fd.Comment != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", f.Path, fd.Comment))
		}
		if fd.Verdict == review.Reject && len(fd.Hunks) == 0 {
			notes = append(notes, fmt.Sprintf("- %s: the whole change to this file was rejected", f.Path))
		}
		for _, i := range slices.Sorted(maps.Keys(fd.Hunks)) {
			hd := fd.Hunks[i]
			if i < 0 || i >= len(f.Hunks) {
				continue
			}
			h := f.Hunks[i]
			where := fmt.Sprintf("- %s, hunk %d (lines %d-%d)", f.Path, i+1, h.NewStart, h.NewStart+max(h.NewLines-1, 0))
			switch {
			case hd.Verdict == review.Reject && hd.Comment != "":
				notes = append(notes, fmt.Sprintf("%s was rejected: %s", where, hd.Comment))
			case hd.Verdict == review.Reject:
				notes = append(notes, where+" was rejected")
			case hd.Comment != "":
				notes = append(notes, fmt.Sprintf("%s: %s", where, hd.Comment))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nTheir comments and rejections:\n")
		b.WriteString(strings.Join(notes, "\n"))
		b.WriteString("\n")
	}
	b.WriteString("\nThe workspace holds your previous changes. Revise them accordingly and update .airlock/summary.md.\n")
	return b.String()
}

// Reply sends a reviewed sandbox back to its agent for another round: a
// fresh VM gets the sandbox's current tree (the baseline plus every
// change so far), o.Command runs with the reply prompt in its
// environment (AIRLOCK_REPLY, AIRLOCK_ROUND; the CLI puts it in an agent
// preset's continue command), and its changes are collected. The review
// then shows the total against the baseline, and RoundChangeset what
// this round changed. The previous round is kept in rounds/N/. o's
// Project, Baseline, Group and Attempt are ignored.
func (s *Store) Reply(ctx context.Context, id, message string, o RunOptions) (*RunResult, error) {
	if strings.TrimSpace(message) == "" {
		return nil, errors.New("reply: say what the agent should do differently (--message)")
	}
	if o.Boot == nil {
		return nil, errors.New("reply: no way to boot a machine")
	}
	sb, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	release, err := sb.hold()
	if err != nil {
		return nil, err
	}
	defer release()
	meta, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	if meta.Status != StatusReady && meta.Status != StatusApplied {
		return nil, fmt.Errorf("reply to %s: it is %s; only a sandbox ready for review can be sent back", sb.ID, meta.Status)
	}
	if meta.SyncMode == SyncVirtiofs {
		return nil, fmt.Errorf("reply to %s: a virtiofs sandbox cannot be continued yet; start a new run", sb.ID)
	}
	prompt, err := sb.ReplyPrompt(ctx, message)
	if err != nil {
		return nil, err
	}
	start, err := sb.readManifest(GuestFile, false)
	if err != nil {
		return nil, err
	}
	start = withoutMeta(start)
	round := max(meta.Round, 1)
	if err := sb.keepRound(round); err != nil {
		return nil, err
	}
	next := filepath.Join(sb.Path(RoundsDir), strconv.Itoa(round+1))
	if err := os.MkdirAll(next, 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(next, "prompt.md"), []byte(prompt), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load(meta.Project)
	if err != nil {
		return nil, err
	}
	o.Project, o.Baseline, o.Group, o.Attempt, o.Sync = meta.Project, nil, "", 0, SyncCopy
	o.Env = maps.Clone(o.Env)
	if o.Env == nil {
		o.Env = map[string]string{}
	}
	o.Env["AIRLOCK_REPLY"], o.Env["AIRLOCK_ROUND"] = prompt, strconv.Itoa(round+1)
	if len(o.Command) == 0 && o.Script == nil {
		// The same command as the first round, told about the reply by
		// its environment.
		o.Command = meta.Command
		if meta.ScriptName != "" {
			if o.Script, err = os.ReadFile(sb.Path(ScriptFile)); err != nil {
				return nil, fmt.Errorf("reply: the first round's script: %w", err)
			}
			o.ScriptName = meta.ScriptName
		}
	}
	if o.Transfer == nil {
		o.Transfer = DefaultTransfer()
	}
	if o.Verify == "" && !o.NoVerify && meta.Verify != nil {
		o.Verify = meta.Verify.Command
	}
	r := &runner{s: s, o: o, project: meta.Project, cfg: cfg, progress: o.Progress, log: o.Logger, sb: sb, base: start}
	if r.progress == nil {
		r.progress = func(Progress) {}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.res = &RunResult{Sandbox: sb}
	if _, err := sb.Update(func(m *Meta) {
		m.Round, m.Verify, m.ExitCode, m.Error = round+1, nil, nil, ""
		if o.Script != nil {
			m.Command = o.Command
		}
	}); err != nil {
		return nil, err
	}
	_ = os.Remove(sb.Path(SummaryFile))
	_ = os.Remove(sb.Path(FinalFile))
	_ = os.Remove(sb.Path(VerifyFile))
	if err := sb.Audit(Event{Event: EventReply, Data: map[string]any{"round": round + 1, "message": message, "prompt_sha256": fmt.Sprintf("%x", sha256.Sum256([]byte(prompt)))}}); err != nil {
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

// keepRound copies the sandbox's latest round (guest manifest, summary,
// verify output) into rounds/N/, once.
func (sb *Sandbox) keepRound(n int) error {
	dir := filepath.Join(sb.Path(RoundsDir), strconv.Itoa(n))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{GuestFile, SummaryFile, FinalFile, VerifyFile} {
		data, err := os.ReadFile(sb.Path(name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// RoundChangeset is what round n changed (n ≥ 2): the previous round's
// tree against round n's (the latest round is the sandbox's own).
func (sb *Sandbox) RoundChangeset(ctx context.Context, n int) (*review.Changeset, error) {
	m, err := sb.Meta()
	if err != nil {
		return nil, err
	}
	latest := max(m.Round, 1)
	if n < 2 || n > latest {
		return nil, fmt.Errorf("sandbox %s has rounds 1 to %d; changes since the previous round exist for rounds 2 to %d", sb.ID, latest, latest)
	}
	prev, err := sb.readManifest(filepath.Join(RoundsDir, strconv.Itoa(n-1), GuestFile), false)
	if err != nil {
		return nil, err
	}
	cur := GuestFile
	if n < latest {
		cur = filepath.Join(RoundsDir, strconv.Itoa(n), GuestFile)
	}
	now, err := sb.readManifest(cur, false)
	if err != nil {
		return nil, err
	}
	return sb.changesetOf(ctx, manifest.Diff(withoutMeta(prev), withoutMeta(now)))
}
