package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
)

// rollBack returns every path of j to its Before state, newest step first.
// Steps not done yet, or already undone, are recognised and skipped. It
// goes as an apply does (see journal.go), the journal already saying
// Undoing: every file to restore staged, one sync, the steps, one sync,
// then Undone.
func rollBack(pr *project, js journalStore, j *Journal, log *slog.Logger) error {
	if err := js.setState(j, Undoing); err != nil {
		return err
	}
	b := newBatch()
	staged, err := pr.stageFiles(j.Steps, false, js.get, b)
	if err == nil {
		err = b.sync()
	}
	if err != nil {
		pr.removeTemps(j.Steps)
		return fmt.Errorf("undo: %w", err)
	}
	var errs []error
	for i := len(j.Steps) - 1; i >= 0; i-- {
		s := j.Steps[i]
		cur, _, err := pr.replayState(s.Path)
		if err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.Path, err))
			continue
		}
		if cur.Equal(s.Before) || matchesEarlierBefore(j.Steps[:i], s.Path, cur) {
			continue
		}
		if !cur.Equal(s.After) {
			errs = append(errs, fmt.Errorf("undo %s: it changed after the apply; left as it is", s.Path))
			continue
		}
		log.Debug("undo step", "path", s.Path)
		if tmp, ok := staged[i]; ok {
			delete(staged, i)
			err = pr.placeStaged(s.Path, tmp, b)
		} else {
			err = pr.setState(s.Path, s.Before, js.get, b)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("undo %s: %w", s.Path, err))
		}
	}
	for _, tmp := range staged {
		_ = pr.root.Remove(tmp)
	}
	if err := b.sync(); err != nil {
		errs = append(errs, fmt.Errorf("undo: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return js.setState(j, Undone)
}

func matchesEarlierBefore(steps []Step, p string, cur EntryState) bool {
	for _, s := range steps {
		if s.Path == p && cur.Equal(s.Before) {
			return true
		}
	}
	return false
}

// UndoError lists paths changed after an apply, which Undo will not
// overwrite.
type UndoError struct {
	Paths []string
}

func (e *UndoError) Error() string {
	return fmt.Sprintf("undo: %s changed after the apply; nothing was undone (undoing would lose those edits)", strings.Join(e.Paths, ", "))
}

// Undo reverts the apply recorded in journalDir: every touched path gets
// back its content, mode, type or absence byte for byte, and created
// directories are removed. If any touched path changed since the apply,
// Undo changes nothing and returns an *UndoError.
func Undo(ctx context.Context, journalDir string) error {
	js := newJournalStore(journalDir)
	j, err := ReadJournal(journalDir)
	if err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	switch j.State {
	case Undone:
		return nil
	case Pending:
		return fmt.Errorf("undo: the apply in %s did not finish; run recover first", journalDir)
	}
	root, err := os.OpenRoot(j.Project)
	if err != nil {
		return fmt.Errorf("undo: open project: %w", err)
	}
	defer root.Close()
	pr := &project{root: root, dir: j.Project}
	if j.State == Applied {
		last := map[string]EntryState{}
		for _, s := range j.Steps {
			last[s.Path] = s.After
		}
		var changed []string
		for p, want := range last {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("undo: %w", err)
			}
			cur, _, err := pr.replayState(p)
			if err != nil || !cur.Equal(want) {
				changed = append(changed, p)
			}
		}
		if len(changed) > 0 {
			sort.Strings(changed)
			return &UndoError{Paths: changed}
		}
	}
	if err := rollBack(pr, js, j, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	return nil
}
