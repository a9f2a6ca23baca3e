package gui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
)

// conflictsPane is the review window's way to conflicts: when an apply
// from the review is held back (or left short) by conflicts with the
// user's edits, it opens the conflict window (ConflictWindow,
// conflicts.go) and tells the review what that window wrote.
type conflictsPane struct {
	svc   ConflictService
	id    string
	async func(func())
	ev    conflictsEvents
}

// conflictsEvents is what the conflicts tell the window they are in.
type conflictsEvents interface {
	// say shows a line on the status line.
	say(status string)
	// reviewChanged tells whoever follows the sandbox that it changed.
	reviewChanged()
}

// newConflictsPane is the conflicts of sandbox id's applies; async runs
// the conflict window's applies off fyne's goroutine.
func newConflictsPane(svc ConflictService, id string, async func(func()), ev conflictsEvents) *conflictsPane {
	return &conflictsPane{svc: svc, id: id, async: async, ev: ev}
}

// resolve opens the conflict window for res, an apply of d from the
// review window (leftOut says what the user left out, for the status
// line); closed is told when it closes. then, if set, is told once the
// window has written every file (the review's approved actions are sent
// then).
func (p *conflictsPane) resolve(d review.Decisions, res *sandbox.ApplyResult, leftOut string, then func(summary string), closed func()) {
	w := NewConflictWindow(fyne.CurrentApp(), p.svc, p.id, d, res)
	w.async = p.async
	w.onApply = func(res *sandbox.ApplyResult) {
		summary := applySummary(res)
		if n := len(res.Resolved); n > 0 {
			summary = strings.TrimSuffix(summary, ".") + fmt.Sprintf(", resolved %d.", n)
		}
		p.ev.say(summary + leftOut)
		if then != nil && len(res.Conflicts) == 0 {
			then(summary + leftOut)
		}
		p.ev.reviewChanged()
	}
	if res.Held {
		p.ev.say(fmt.Sprintf("Nothing written yet: %s with your edits; choose in the Conflicts window.", plural(len(res.Conflicts), "1 file conflicts", fmt.Sprintf("%d files conflict", len(res.Conflicts)))))
	}
	w.Window.SetOnClosed(closed)
	w.Window.Show()
}
