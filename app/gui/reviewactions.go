package gui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// apply writes the approved files into the project and then sends the
// approved actions never sent, once the user has agreed to send them
// (asked first: a Cancel applies nothing and sends nothing).
func (r *ReviewWindow) apply() { r.applyAs(nil) }

// applyAs is apply, with p a commit of what is written (nil: the working
// tree only). A commit on a new branch sends no action: actions are sent
// by an apply to the working tree.
func (r *ReviewWindow) applyAs(p *promotion) {
	if r.roundOnly {
		return
	}
	saveErr := r.saveErr()
	d := r.m.decisions()
	taken, _ := r.m.approved()
	sends := r.m.toSend()
	if p != nil && len(taken) == 0 {
		r.status.SetText("Nothing to commit: approve files or hunks first.")
		return
	}
	if p != nil && p.branch != "" {
		sends = nil
	}
	if len(taken) == 0 && len(sends) == 0 {
		r.status.SetText("Nothing approved: approve files, hunks or actions first.")
		return
	}
	if saveErr != nil && len(sends) > 0 {
		// Actions are sent as the saved review approves them: one the
		// window rejected since the last save could be sent.
		r.status.SetText("Nothing applied, nothing sent: the review could not be saved.")
		dialog.ShowError(fmt.Errorf("the review could not be saved (%w), and actions are sent only as the saved review approves them. Nothing was applied or sent: fix the problem and apply again", saveErr), r.Window)
		return
	}
	var flagged []*review.File
	for _, f := range taken {
		if f.HasFlag(review.FlagHostExec) {
			flagged = append(flagged, f)
		}
	}
	r.applyBtn.Disable()
	r.askSend(sends, len(taken) > 0, func(send bool) {
		if !send {
			r.applyBtn.Enable()
			r.status.SetText("Nothing applied, nothing sent.")
			return
		}
		r.askHostExec(flagged, d, nil, len(sends) > 0, p)
	})
}

// askHostExec asks, once per file, whether each approved file that runs
// on the user's machine is to be applied; a No leaves it out of this
// apply (the review keeps its verdict). Then it applies what is left,
// and sends the approved actions with send.
func (r *ReviewWindow) askHostExec(flagged []*review.File, d review.Decisions, leftOut []string, send bool, p *promotion) {
	if len(flagged) == 0 {
		if p != nil {
			r.commitDecided(d, leftOut, send, p)
			return
		}
		r.applyDecided(d, leftOut, send)
		return
	}
	f := flagged[0]
	why := strings.TrimPrefix(f.FlagReason(review.FlagHostExec), review.HostExecPrefix)
	r.confirm("Runs on your machine", fmt.Sprintf("%s runs on your machine (%s).\n\nApply it?", f.Path, why), func(yes bool) {
		if !yes {
			delete(d.Files, f.Path)
			leftOut = append(leftOut, f.Path)
		}
		r.askHostExec(flagged[1:], d, leftOut, send, p)
	})
}

// applyDecided applies d; leftOut names the files the user chose to
// leave out, for the status line. With send, the approved actions are
// sent once the files are written (none to write is written).
func (r *ReviewWindow) applyDecided(d review.Decisions, leftOut []string, send bool) {
	left := leftOutNote(leftOut)
	if !r.writesFiles(d) {
		r.applyBtn.Enable()
		if send {
			r.sendActions(strings.TrimSpace("No files to write." + left))
			return
		}
		r.status.SetText("Nothing applied." + left)
		return
	}
	r.status.SetText("Applying…")
	r.async(func() {
		res, err := r.svc.ApplyWith(context.Background(), r.id, d, sandbox.ApplyOptions{AllOrNothing: true})
		fyne.Do(func() {
			r.applyBtn.Enable()
			if err != nil {
				r.status.SetText("Apply failed")
				dialog.ShowError(err, r.Window)
				return
			}
			r.status.SetText(applySummary(res) + left)
			if len(res.Conflicts) > 0 {
				var then func(summary string)
				if send {
					then = r.sendActions
				}
				r.resolveConflicts(d, res, left, then)
				if send {
					// Held by the conflicts: the actions go once the
					// files are written.
					r.status.SetText(r.status.Text + " The approved actions are sent once the files are written.")
				}
			} else if send {
				r.sendActions(applySummary(res) + left)
			}
			if r.onChange != nil {
				r.onChange()
			}
		})
	})
}

func applySummary(res *sandbox.ApplyResult) string {
	parts := []string{fmt.Sprintf("applied %d", len(res.Applied))}
	if len(res.Merged) > 0 {
		parts = append(parts, fmt.Sprintf("merged %d", len(res.Merged)))
	}
	if len(res.Conflicts) > 0 {
		parts = append(parts, fmt.Sprintf("%d in conflict (left untouched)", len(res.Conflicts)))
	}
	if len(res.Skipped) > 0 {
		parts = append(parts, fmt.Sprintf("skipped %d", len(res.Skipped)))
	}
	return "Done: " + strings.Join(parts, ", ") + "."
}

func (r *ReviewWindow) undo() {
	r.status.SetText("Undoing…")
	r.async(func() {
		journal, err := r.svc.Undo(context.Background(), r.id)
		fyne.Do(func() {
			switch {
			case errors.Is(err, sandbox.ErrNothingToUndo):
				r.status.SetText("Nothing to undo: no apply of this sandbox is in effect.")
			case err != nil:
				r.status.SetText("Undo failed")
				dialog.ShowError(err, r.Window)
			default:
				msg := "Undone: the project is back as it was before apply " + journal[strings.LastIndex(journal, "/")+1:] + "."
				if slices.ContainsFunc(r.full.actionViews(), started) {
					msg += " Actions sent stay sent: undo cannot unsend them."
				}
				r.status.SetText(msg)
				if r.onChange != nil {
					r.onChange()
				}
			}
		})
	})
}

// leftOutNote names, for the status line, the approved files an apply left
// out because they run on the user's machine ("" for none). The paths
// are the guest's.
func leftOutNote(leftOut []string) string {
	if len(leftOut) == 0 {
		return ""
	}
	return fmt.Sprintf(" Left out (%s on your machine): %s.", plural(len(leftOut), "runs", "run"), safetext.Line(strings.Join(leftOut, ", ")))
}

// writesFiles says whether d takes any change of a file.
func (r *ReviewWindow) writesFiles(d review.Decisions) bool {
	for _, f := range r.m.cs.Files {
		if _, ok := d.Selection(f); ok {
			return true
		}
	}
	return false
}
