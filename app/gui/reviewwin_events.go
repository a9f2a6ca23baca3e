package gui

import (
	"fmt"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// The review window's side of its panes: what they tell it (the events
// of filesEvents, diffEvents, actionsEvents, commentsEvents, roundsEvents,
// promoteEvents, conflictsEvents and headEvents, which it implements),
// each routed to the panes it concerns.

var (
	_ headEvents      = (*ReviewWindow)(nil)
	_ filesEvents     = (*ReviewWindow)(nil)
	_ diffEvents      = (*ReviewWindow)(nil)
	_ actionsEvents   = (*ReviewWindow)(nil)
	_ commentsEvents  = (*ReviewWindow)(nil)
	_ roundsEvents    = (*ReviewWindow)(nil)
	_ promoteEvents   = (*ReviewWindow)(nil)
	_ conflictsEvents = (*ReviewWindow)(nil)
)

// selectCurrent shows the cursor's file in the tree and the diff.
func (r *ReviewWindow) selectCurrent() {
	f := r.m.current()
	if f == nil {
		return
	}
	r.m.action = 0
	hunk := r.m.hunk
	r.files.selectRow(f.Path) // OnSelected resets the hunk
	r.files.scrollTo(f.Path)
	r.m.hunk = hunk
	r.showFile()
}

// wholeReview shows the whole review instead of what the last round
// changed, if that is shown.
func (r *ReviewWindow) wholeReview() {
	if r.roundOnly {
		r.view.SetSelectedIndex(0)
	}
}

// commentsEdited follows a comment resolved, opened again or deleted
// outside the diff: saved, listed and drawn again.
func (r *ReviewWindow) commentsEdited() {
	r.refresh()
	r.diff.render(false)
}

// commentDeleted follows comment i of file path deleted outside the
// diff: a comment being edited in the diff is this one (gone) or moves
// up.
func (r *ReviewWindow) commentDeleted(path string, i int) {
	r.diff.forgetComment(path, i)
	r.commentsEdited()
}

// showComment shows a comment in place in the Changes tab, its lines
// unfolded.
func (r *ReviewWindow) showComment(c review.FileComment) {
	r.wholeReview() // comments are on the whole review
	if r.full.cs.File(c.Path) == nil {
		r.status.SetText(safetext.Line(c.Path) + " is no longer changed: its comment stays in the list.")
		return
	}
	r.tabs.SelectIndex(0)
	r.ShowFile(c.Path)
	r.diff.revealComment(c.Path, c.Index)
}

// watchingLiveRound reports whether the tab of the round sent back from
// this window is in front.
func (r *ReviewWindow) watchingLiveRound() bool { return r.rounds.watching() }

// roundReady says, in a review opened again on a round that just ended,
// where its changes and its output are; with showOutput the Transcript
// tab (on that round) is in front.
func (r *ReviewWindow) roundReady(showOutput bool) {
	r.status.SetText(fmt.Sprintf("Round %d is ready; its output is under Transcript.", r.round))
	if showOutput {
		r.tabs.SelectIndex(2)
	}
}

// run runs f off fyne's goroutine, as async says when it is called.
func (r *ReviewWindow) run(f func()) { r.async(f) }

// say shows a line on the status line.
func (r *ReviewWindow) say(status string) { r.status.SetText(status) }

// roundRunning holds Apply while a round sent back runs.
func (r *ReviewWindow) roundRunning(on bool) { r.promo.hold(on) }

// reviewChanged tells the main window, if it follows this window, that
// the sandbox changed (an apply, an undo, a round).
func (r *ReviewWindow) reviewChanged() {
	if r.onChange != nil {
		r.onChange()
	}
}

// nextRound tells the main window, if it follows this window, that a
// round sent back is ready to review.
func (r *ReviewWindow) nextRound() {
	if r.onRound != nil {
		r.onRound()
	}
}

// flaggedOnly lists only the flagged files.
func (r *ReviewWindow) flaggedOnly() { r.files.flaggedOnly() }

// ask asks a yes/no question and calls answer with the reply, as confirm
// says when it is asked.
func (r *ReviewWindow) ask(title, message string, answer func(bool)) {
	r.confirm(title, message, answer)
}

// sayMore adds to the status line.
func (r *ReviewWindow) sayMore(more string) { r.status.SetText(r.status.Text + more) }

// showAction shows action id in the diff pane's place.
func (r *ReviewWindow) showAction(id int) {
	r.m.action = id
	r.files.setFolder("") // no file is selected: the folder buttons act on all
	r.showFile()
}

// selectAction selects action id's row (its group unfolded) and shows
// it.
func (r *ReviewWindow) selectAction(id int) {
	r.files.selectRow(actionRowID(id)) // OnSelected shows it
	r.files.scrollTo(actionRowID(id))
	if r.m.action != id {
		r.showAction(id)
	}
}

// actionsReloaded shows the actions as read again: their rows, the
// decisions' counts, and the action shown.
func (r *ReviewWindow) actionsReloaded() {
	r.files.relist()
	r.redraw()
	if r.m.action != 0 {
		r.diff.render(false)
	}
}

// decideAction approves or rejects staged action id.
func (r *ReviewWindow) decideAction(id int, approve bool) { r.actions.setVerdict(id, approve) }

// showFile shows the file under the cursor (or the action) in the diff
// and scrolls to the hunk under the cursor.
func (r *ReviewWindow) showFile() { r.diff.showFile() }
