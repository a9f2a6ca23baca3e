package review

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// rollForward finishes the steps of j not done yet.
func rollForward(pr *project, js journalStore, j *Journal, log *slog.Logger) error {
	for i, s := range j.Steps {
		cur, _, err := pr.replayState(s.Path)
		if err != nil {
			return fmt.Errorf("recover %s: %w", s.Path, err)
		}
		if cur.Equal(s.After) || matchesLaterAfter(j.Steps[i+1:], s.Path, cur) {
			continue
		}
		if !cur.Equal(s.Before) {
			return fmt.Errorf("recover %s: it changed since the interrupted apply; roll back instead", s.Path)
		}
		log.Debug("recover step", "path", s.Path)
		if err := pr.setState(s.Path, s.After, js.get, nil); err != nil {
			return fmt.Errorf("recover %s: %w", s.Path, err)
		}
	}
	return js.setState(j, Applied)
}

func matchesLaterAfter(steps []Step, p string, cur EntryState) bool {
	for _, s := range steps {
		if s.Path == p && cur.Equal(s.After) {
			return true
		}
	}
	return false
}

// RecoverMode chooses what Recover does with an interrupted apply.
type RecoverMode int

const (
	// RollForward finishes the interrupted apply: the user approved it and
	// every step was checked before the journal was written.
	RollForward RecoverMode = iota
	// RollBack returns the project to what it was before the apply.
	RollBack
)

// Recover looks at the journal in journalDir and, if its apply was
// interrupted (a crash, a power cut), finishes or rolls it back as mode
// says; an interrupted undo is always finished. It returns the journal's
// final state; a finished or undone journal is left alone.
func Recover(ctx context.Context, journalDir string, mode RecoverMode) (JournalState, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("recover: %w", err)
	}
	js := newJournalStore(journalDir)
	j, err := ReadJournal(journalDir)
	if err != nil {
		return "", fmt.Errorf("recover: %w", err)
	}
	if j.State == Applied || j.State == Undone {
		return j.State, nil
	}
	root, err := os.OpenRoot(j.Project)
	if err != nil {
		return j.State, fmt.Errorf("recover: open project: %w", err)
	}
	defer root.Close()
	pr := &project{root: root, dir: j.Project}
	log := slog.New(slog.DiscardHandler)
	pr.removeTemps(j.Steps)
	if j.State == Undoing || mode == RollBack {
		err = rollBack(pr, js, j, log)
	} else {
		err = rollForward(pr, js, j, log)
	}
	return j.State, err
}
