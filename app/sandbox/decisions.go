package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/airlock-dev/airlock/internal/atomicfile"
	"github.com/airlock-dev/airlock/review"
)

// ReviewFile holds the decisions of a review in progress (verdicts and
// comments per file and per hunk), so that a review outlives the window
// it was made in. Apply is still given its decisions explicitly.
const ReviewFile = "review.json"

// Decisions returns the saved review decisions, or empty ones when none
// were saved.
func (sb *Sandbox) Decisions() (review.Decisions, error) {
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

// SaveDecisions stores d as the review in progress, atomically.
func (sb *Sandbox) SaveDecisions(d review.Decisions) error {
	if err := atomicfile.WriteFile(sb.Path(ReviewFile), mustJSON(d), 0o600); err != nil {
		return fmt.Errorf("save the review of %s: %w", sb.ID, err)
	}
	return nil
}
