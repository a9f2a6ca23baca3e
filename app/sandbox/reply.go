package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// RoundsDir keeps each finished round of a sandbox (rounds/N/: its
// guest manifest, summary, final message and verify output) once a reply starts the
// next one; the sandbox's own files are always the latest round.
const RoundsDir = "rounds"

// PromptFile is the prompt the reply starting round N sent, in
// rounds/N/.
const PromptFile = "prompt.md"

// EventReply records that the user sent a sandbox back to its agent.
const EventReply EventKind = "reply"

// Reply is what the next round tells the agent: the prompt, and the
// comments and rejections it carries (to mark as sent once the round
// runs, MarkSent).
type Reply struct {
	Prompt   string
	Feedback review.Feedback
}

// PrepareReply is the next round's Reply: the user's message, then the
// comments not sent yet, each with the lines it is about, and the
// rejected hunks, from the review kept with the sandbox.
func (sb *Sandbox) PrepareReply(ctx context.Context, message string) (*Reply, error) {
	cs, err := sb.Changeset(ctx)
	if err != nil {
		return nil, err
	}
	d, err := sb.Decisions(ctx)
	if err != nil {
		return nil, err
	}
	fb := d.Feedback(cs)
	return &Reply{Prompt: replyPrompt(message, fb), Feedback: fb}, nil
}

func replyPrompt(message string, fb review.Feedback) string {
	var b strings.Builder
	b.WriteString("The reviewer sent your changes back with this message:\n\n")
	b.WriteString(strings.TrimSpace(message))
	b.WriteString("\n")
	if t := fb.Text(); t != "" {
		b.WriteString("\n")
		b.WriteString(t)
	}
	b.WriteString("\nThe workspace holds your previous changes. Revise them accordingly and update .airlock/summary.md.\n")
	return b.String()
}

// KeepRound copies the sandbox's latest round (guest manifest, summary,
// final message, verify output) into rounds/N/, and the part of the
// transcript that round printed (transcript.log holds every round's,
// one after the other).
func (sb *Sandbox) KeepRound(n int) error {
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
	all, err := sb.Transcript()
	if err != nil {
		return err
	}
	from := min(sb.keptTranscript(n), int64(len(all)))
	return atomicfile.WriteFile(filepath.Join(dir, TranscriptFile), all[from:], 0o600)
}

// keptTranscript is how many bytes of transcript.log the rounds before
// round n kept as theirs.
func (sb *Sandbox) keptTranscript(n int) int64 {
	var size int64
	for k := 1; k < n; k++ {
		if fi, err := os.Stat(filepath.Join(sb.Path(RoundsDir), strconv.Itoa(k), TranscriptFile)); err == nil {
			size += fi.Size()
		}
	}
	return size
}

// RoundLog is one round of a sandbox as it ran: what the agent was told
// by the reply that started it (none for round 1) and what its command
// printed.
type RoundLog struct {
	Round      int
	Prompt     string
	Transcript []byte
	// Kept is false for an earlier round whose transcript was not kept
	// apart (rounds kept by an older Airlock): the latest round's
	// transcript then holds it too.
	Kept bool
}

// RoundLog returns round n (1 to the sandbox's round).
func (sb *Sandbox) RoundLog(n int) (RoundLog, error) {
	m, err := sb.Meta()
	if err != nil {
		return RoundLog{}, err
	}
	latest := max(m.Round, 1)
	if n < 1 || n > latest {
		return RoundLog{}, fmt.Errorf("sandbox %s has rounds 1 to %d, not %d", sb.ID, latest, n)
	}
	l := RoundLog{Round: n, Kept: true}
	dir := filepath.Join(sb.Path(RoundsDir), strconv.Itoa(n))
	if n >= 2 {
		p, err := os.ReadFile(filepath.Join(dir, PromptFile))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return l, err
		}
		l.Prompt = string(p)
	}
	if n < latest {
		l.Transcript, err = os.ReadFile(filepath.Join(dir, TranscriptFile))
		if errors.Is(err, os.ErrNotExist) {
			l.Kept, err = false, nil
		}
		return l, err
	}
	all, err := sb.Transcript()
	if err != nil {
		return l, err
	}
	l.Transcript = all[min(sb.keptTranscript(n), int64(len(all))):]
	return l, nil
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
	prev, err := sb.ReadManifest(filepath.Join(RoundsDir, strconv.Itoa(n-1), GuestFile), false)
	if err != nil {
		return nil, err
	}
	cur := GuestFile
	if n < latest {
		cur = filepath.Join(RoundsDir, strconv.Itoa(n), GuestFile)
	}
	now, err := sb.ReadManifest(cur, false)
	if err != nil {
		return nil, err
	}
	return sb.ChangesetOf(ctx, manifest.Diff(WithoutMeta(prev), WithoutMeta(now)))
}
