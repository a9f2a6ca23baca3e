package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/internal/filelock"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
)

// ReviewFile holds the decisions of a review in progress (verdicts per
// file and per hunk, comments on lines), so that a review outlives the
// window it was made in. Apply is still given its decisions explicitly.
const ReviewFile = "review.json"

// Decisions returns the saved review decisions, or empty ones when none
// were saved, fitted to the sandbox's latest round:
//
//   - A review saved before comments had lines (a file's or a hunk's
//     Comment) is read as Comments once, on the lines of the hunk it was
//     on, and saved in the new shape.
//   - Verdicts given on an earlier round are carried to the latest one
//     only where the round left the change the same (review.CarryVerdicts):
//     hunks are numbered anew each round, and an old hunk's verdict never
//     lands on a new hunk. Comments are all kept.
//
// Decisions.Round is the round the verdicts fit. While a round runs the
// review is returned as it was saved.
func (sb *Sandbox) Decisions(ctx context.Context) (review.Decisions, error) {
	d, err := sb.readDecisions()
	if err != nil {
		return d, err
	}
	m, err := sb.Meta()
	if err != nil {
		return d, err
	}
	latest := max(m.Round, 1)
	collected := m.Status == StatusReady || m.Status == StatusApplied
	legacy := hasLegacy(d)
	carry := collected && d.Round != 0 && d.Round < latest
	if !legacy && !carry {
		if d.Round == 0 && collected {
			d.Round = latest
		}
		return d, nil
	}
	cur, err := sb.Changeset(ctx)
	if err != nil && !errors.Is(err, ErrNotReady) {
		return d, err
	}
	// The changeset the verdicts and the old comments were given on.
	given := cur
	if carry {
		given = sb.roundTotal(ctx, d.Round)
	}
	if legacy {
		d.MigrateLegacy(given)
	}
	if carry {
		d = d.CarryVerdicts(given, cur)
	}
	if collected {
		d.Round = latest
	}
	if err := sb.SaveDecisions(d); err != nil {
		return d, err
	}
	return d, nil
}

// roundTotal is what the sandbox had changed at the end of round n (all
// its rounds up to n against the baseline), or nil when that cannot be
// built (a round kept before manifests were, an unreadable one).
func (sb *Sandbox) roundTotal(ctx context.Context, n int) *review.Changeset {
	base, err := sb.ReadManifest(BaselineFile, true)
	if err != nil {
		return nil
	}
	gm, err := sb.ReadManifest(filepath.Join(RoundsDir, strconv.Itoa(n), GuestFile), false)
	if err != nil {
		return nil
	}
	cs, err := sb.ChangesetOf(ctx, manifest.Diff(WithoutMeta(base), WithoutMeta(gm)))
	if err != nil {
		return nil
	}
	return cs
}

func hasLegacy(d review.Decisions) bool {
	for _, fd := range d.Files {
		if fd.Comment != "" {
			return true
		}
		for _, h := range fd.Hunks {
			if h.Comment != "" {
				return true
			}
		}
	}
	return false
}

// readDecisions reads review.json as it was saved.
func (sb *Sandbox) readDecisions() (review.Decisions, error) {
	var d review.Decisions
	data, err := os.ReadFile(sb.Path(ReviewFile))
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read the review of %s: %w", sb.ID, err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("read the review of %s: %w", sb.ID, err)
	}
	return d, nil
}

// SaveDecisions stores d as the review in progress, atomically. A
// comment the saved review has as sent stays sent (a window may save a
// review it loaded before a reply went out); d without a Round takes the
// saved review's, or, when none was saved, the round collected now (the
// one a fresh review's verdicts are given on).
func (sb *Sandbox) SaveDecisions(d review.Decisions) error {
	var changed []int
	var verdicts map[int]review.Verdict
	err := sb.updateDecisions(false, func(stored review.Decisions) review.Decisions {
		for id, v := range d.Actions {
			if stored.Actions[id] != v {
				changed = append(changed, id)
			}
		}
		for id := range stored.Actions {
			if _, ok := d.Actions[id]; !ok {
				changed = append(changed, id)
			}
		}
		verdicts = d.Actions
		d.KeepSent(stored)
		if d.Round == 0 {
			d.Round = stored.Round
		}
		if m, err := sb.Meta(); d.Round == 0 && err == nil && (m.Status == StatusReady || m.Status == StatusApplied) {
			d.Round = max(m.Round, 1)
		}
		return d
	})
	if err != nil {
		return err
	}
	return sb.auditVerdicts(changed, verdicts)
}

// MarkSent records that the reply which started round carried the
// comments sent (review.Decisions.MarkSent), in the saved review.
func (sb *Sandbox) MarkSent(round int, sent []review.FileComment) error {
	if len(sent) == 0 {
		return nil
	}
	return sb.updateDecisions(true, func(d review.Decisions) review.Decisions {
		d.MarkSent(round, sent)
		return d
	})
}

// updateDecisions replaces the saved review by change(saved), under a
// lock, so that a reply marking its comments and a window saving do not
// lose each other's change. An unreadable saved review is an error when
// strict, else replaced.
func (sb *Sandbox) updateDecisions(strict bool, change func(review.Decisions) review.Decisions) error {
	unlock, err := filelock.Lock(sb.Path("review.lock"))
	if err != nil {
		return fmt.Errorf("save the review of %s: %w", sb.ID, err)
	}
	defer unlock()
	stored, err := sb.readDecisions()
	if err != nil {
		if strict {
			return err
		}
		stored = review.Decisions{}
	}
	d := change(stored)
	if err := atomicfile.WriteFile(sb.Path(ReviewFile), mustJSON(d), 0o600); err != nil {
		return fmt.Errorf("save the review of %s: %w", sb.ID, err)
	}
	return nil
}
