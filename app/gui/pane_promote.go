package gui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// promotePane is the review window's Apply: the Apply selected button
// and its menu (to the working tree, applied and committed, a commit on a
// new branch), Undo last apply, and what they set going: a question per
// approved file that runs on the user's machine and one before sending
// actions, the apply, the conflict window, the commit, the sending.
type promotePane struct {
	svc PromoteService
	id  string
	// m is the review shown, read only in a round's own view; undo looks
	// at the whole review's actions (full).
	m, full  *reviewModel
	readOnly bool
	// status is the sandbox's as last read: Undo is offered while an
	// apply is in effect.
	status    sandbox.Status
	win       fyne.Window
	async     func(func())
	confirm   func(title, message string, answer func(bool))
	actions   actionSender
	conflicts *conflictsPane
	ev        promoteEvents

	applyBtn  *widget.Button
	applyMenu *widget.Button // beside Apply: to the working tree, commit, or new branch
	undoBtn   *widget.Button
}

// promoteEvents is what Apply tells the window it is in.
type promoteEvents interface {
	// say shows a line on the status line; sayMore adds to it.
	say(status string)
	sayMore(more string)
	// saveErr keeps the review with the sandbox, reporting a failure.
	saveErr() error
	// reviewChanged tells whoever follows the sandbox that it changed.
	reviewChanged()
}

// actionSender is what Apply needs of the staged actions: to ask before
// any is sent, and to send them.
type actionSender interface {
	// askSend asks once whether sends, the approved actions never sent,
	// are to be sent; files says approved files are written first.
	askSend(sends []sandbox.ActionView, files bool, answer func(send bool))
	// send sends the saved review's approved actions never sent; done
	// is what the apply before it did, for the status line.
	send(done string)
}

// newPromotePane builds Apply and Undo for sandbox id, whose state is
// status, over the review full. Its dialogs open on win, confirm asks
// its yes/no questions, async runs applies off fyne's goroutine.
func newPromotePane(svc PromoteService, id string, status sandbox.Status, full *reviewModel, win fyne.Window, async func(func()),
	confirm func(title, message string, answer func(bool)), actions actionSender, conflicts *conflictsPane, ev promoteEvents) *promotePane {
	p := &promotePane{svc: svc, id: id, status: status, m: full, full: full, win: win, async: async, confirm: confirm,
		actions: actions, conflicts: conflicts, ev: ev}
	p.applyBtn = widget.NewButtonWithIcon("Apply selected", theme.ConfirmIcon(), p.apply)
	p.applyBtn.Importance = widget.HighImportance
	p.applyMenu = p.newApplyMenu()
	p.undoBtn = widget.NewButtonWithIcon("Undo last apply", theme.ContentUndoIcon(), p.undo)
	p.undoState()
	return p
}

// setModel shows the review m, read only or not.
func (p *promotePane) setModel(m *reviewModel, readOnly bool) {
	p.m, p.readOnly = m, readOnly
	p.undoState()
}

// setStatus follows the sandbox's state as read again.
func (p *promotePane) setStatus(st sandbox.Status) {
	p.status = st
	p.undoState()
}

// undoState offers Undo only while an apply of the sandbox is in effect
// (its state is applied), and not in a round's read-only view.
func (p *promotePane) undoState() {
	if p.status == sandbox.StatusApplied && !p.readOnly {
		p.undoBtn.Enable()
	} else {
		p.undoBtn.Disable()
	}
}

// hold holds Apply while something else runs (a round sent back), and
// lets it go.
func (p *promotePane) hold(on bool) {
	if on {
		p.applyBtn.Disable()
	} else {
		p.applyBtn.Enable()
	}
}

// redraw says on Apply what it would apply and send, and offers it only
// when there is something (its menu: when there are files, since commits
// are of files).
func (p *promotePane) redraw() {
	taken, _ := p.m.approved()
	label := fmt.Sprintf("Apply selected (%d %s)", len(taken), plural(len(taken), "file", "files"))
	sends := len(p.m.toSend())
	switch {
	case sends > 0 && len(taken) == 0:
		label = fmt.Sprintf("Apply selected (%d %s)", sends, plural(sends, "action", "actions"))
	case sends > 0:
		label = fmt.Sprintf("Apply selected (%d %s, %d %s)", len(taken), plural(len(taken), "file", "files"), sends, plural(sends, "action", "actions"))
	}
	p.applyBtn.SetText(label)
	if (len(taken) == 0 && sends == 0) || p.readOnly {
		p.applyBtn.Disable()
	} else {
		p.applyBtn.Enable()
	}
	if len(taken) == 0 || p.readOnly {
		p.applyMenu.Disable() // commits are of files
	} else {
		p.applyMenu.Enable()
	}
}

// sendActions sends the approved actions, Apply held while they go.
func (p *promotePane) sendActions(done string) {
	p.applyBtn.Disable()
	p.actions.send(done)
}

// apply writes the approved files into the project and then sends the
// approved actions never sent, once the user has agreed to send them
// (asked first: a Cancel applies nothing and sends nothing).
func (p *promotePane) apply() { p.applyAs(nil) }

// applyAs is apply, with pm a commit of what is written (nil: the working
// tree only). A commit on a new branch sends no action: actions are sent
// by an apply to the working tree.
func (p *promotePane) applyAs(pm *promotion) {
	if p.readOnly {
		return
	}
	saveErr := p.ev.saveErr()
	d := p.m.decisions()
	taken, _ := p.m.approved()
	sends := p.m.toSend()
	if pm != nil && len(taken) == 0 {
		p.ev.say("Nothing to commit: approve files or hunks first.")
		return
	}
	if pm != nil && pm.branch != "" {
		sends = nil
	}
	if len(taken) == 0 && len(sends) == 0 {
		p.ev.say("Nothing approved: approve files, hunks or actions first.")
		return
	}
	if saveErr != nil && len(sends) > 0 {
		// Actions are sent as the saved review approves them: one the
		// window rejected since the last save could be sent.
		p.ev.say("Nothing applied, nothing sent: the review could not be saved.")
		dialog.ShowError(fmt.Errorf("the review could not be saved (%w), and actions are sent only as the saved review approves them. Nothing was applied or sent: fix the problem and apply again", saveErr), p.win)
		return
	}
	var flagged []*review.File
	for _, f := range taken {
		if f.HasFlag(review.FlagHostExec) {
			flagged = append(flagged, f)
		}
	}
	p.applyBtn.Disable()
	p.actions.askSend(sends, len(taken) > 0, func(send bool) {
		if !send {
			p.applyBtn.Enable()
			p.ev.say("Nothing applied, nothing sent.")
			return
		}
		p.askHostExec(flagged, d, nil, len(sends) > 0, pm)
	})
}

// askHostExec asks, once per file, whether each approved file that runs
// on the user's machine is to be applied; a No leaves it out of this
// apply (the review keeps its verdict). Then it applies what is left,
// and sends the approved actions with send.
func (p *promotePane) askHostExec(flagged []*review.File, d review.Decisions, leftOut []string, send bool, pm *promotion) {
	if len(flagged) == 0 {
		if pm != nil {
			p.commitDecided(d, leftOut, send, pm)
			return
		}
		p.applyDecided(d, leftOut, send)
		return
	}
	f := flagged[0]
	why := strings.TrimPrefix(f.FlagReason(review.FlagHostExec), review.HostExecPrefix)
	p.confirm("Runs on your machine", fmt.Sprintf("%s runs on your machine (%s).\n\nApply it?", f.Path, why), func(yes bool) {
		if !yes {
			delete(d.Files, f.Path)
			leftOut = append(leftOut, f.Path)
		}
		p.askHostExec(flagged[1:], d, leftOut, send, pm)
	})
}

// applyDecided applies d; leftOut names the files the user chose to
// leave out, for the status line. With send, the approved actions are
// sent once the files are written (none to write is written).
func (p *promotePane) applyDecided(d review.Decisions, leftOut []string, send bool) {
	left := leftOutNote(leftOut)
	if !p.writesFiles(d) {
		p.applyBtn.Enable()
		if send {
			p.sendActions(strings.TrimSpace("No files to write." + left))
			return
		}
		p.ev.say("Nothing applied." + left)
		return
	}
	p.ev.say("Applying…")
	p.async(func() {
		res, err := p.svc.ApplyWith(context.Background(), p.id, d, sandbox.ApplyOptions{AllOrNothing: true})
		fyne.Do(func() {
			p.applyBtn.Enable()
			if err != nil {
				p.ev.say("Apply failed")
				dialog.ShowError(err, p.win)
				return
			}
			p.ev.say(applySummary(res) + left)
			if len(res.Conflicts) > 0 {
				var then func(summary string)
				if send {
					then = p.sendActions
				}
				p.applyBtn.Disable()
				p.conflicts.resolve(d, res, left, then, p.applyBtn.Enable)
				if send {
					// Held by the conflicts: the actions go once the
					// files are written.
					p.ev.sayMore(" The approved actions are sent once the files are written.")
				}
			} else if send {
				p.sendActions(applySummary(res) + left)
			}
			p.ev.reviewChanged()
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

func (p *promotePane) undo() {
	p.ev.say("Undoing…")
	p.async(func() {
		journal, err := p.svc.Undo(context.Background(), p.id)
		fyne.Do(func() {
			switch {
			case errors.Is(err, sandbox.ErrNothingToUndo):
				p.ev.say("Nothing to undo: no apply of this sandbox is in effect.")
			case err != nil:
				p.ev.say("Undo failed")
				dialog.ShowError(err, p.win)
			default:
				msg := "Undone: the project is back as it was before apply " + journal[strings.LastIndex(journal, "/")+1:] + "."
				if slices.ContainsFunc(p.full.actionViews(), started) {
					msg += " Actions sent stay sent: undo cannot unsend them."
				}
				p.ev.say(msg)
				p.ev.reviewChanged()
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
func (p *promotePane) writesFiles(d review.Decisions) bool {
	for _, f := range p.m.cs.Files {
		if _, ok := d.Selection(f); ok {
			return true
		}
	}
	return false
}
