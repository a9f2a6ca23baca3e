package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// KeepRound copies the sandbox's latest round (guest manifest, summary,
// verify output) into rounds/N/, once.
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
	return sb.changesetOf(ctx, manifest.Diff(WithoutMeta(prev), WithoutMeta(now)))
}
