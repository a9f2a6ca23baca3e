package gui

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/promote"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// Apply's menu: apply to the working tree, apply and commit, or commit on
// a new branch from the baseline's commit (airlock apply --commit and
// --branch).

// promotion is a commit asked for with an apply: its message (the user's,
// prefilled with the agent's summary) and, for a new branch, its name.
type promotion struct {
	message string
	branch  string
}

// The Apply menu's choices.
const (
	applyTree   = "Apply to the working tree"
	applyCommit = "Apply and commit…"
	applyBranch = "Commit on a new branch…"
)

// commitRows is the height of the commit message box, in lines.
const commitRows = 6

// showApplyMenu offers the ways to apply: to the working tree (as the
// Apply button does), applied and committed, or committed on a new branch
// without touching the working tree.
func (p *promotePane) showApplyMenu() {
	if p.applyBtn.Disabled() {
		return // an apply runs (or the menu's own button would be off)
	}
	c := fyne.CurrentApp().Driver().CanvasForObject(p.applyMenu)
	if c == nil {
		return
	}
	menu := fyne.NewMenu("",
		fyne.NewMenuItem(applyTree, p.apply),
		fyne.NewMenuItem(applyCommit, p.askCommit),
		fyne.NewMenuItem(applyBranch, p.askBranch))
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(p.applyMenu)
	widget.ShowPopUpMenuAtPosition(menu, c, pos.AddXY(0, p.applyMenu.Size().Height))
}

// commitForm is the commit dialog's content: the branch's name (for a new
// branch), the message prefilled, and what the commit does.
func commitForm(branch bool, message, what string) (fyne.CanvasObject, *widget.Entry, *widget.Entry) {
	msg := widget.NewMultiLineEntry()
	msg.Wrapping = fyne.TextWrapWord
	msg.SetText(message)
	msg.SetMinRowsVisible(commitRows)
	note := widget.NewLabel(what)
	note.Wrapping = fyne.TextWrapWord
	items := []fyne.CanvasObject{}
	var name *widget.Entry
	if branch {
		name = widget.NewEntry()
		name.SetPlaceHolder("agent/my-change")
		items = append(items, widget.NewLabelWithStyle("New branch", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), name)
	}
	items = append(items, widget.NewLabelWithStyle("Commit message", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), msg, note)
	return fixedWidth(dialogWidth, container.NewVBox(items...)), msg, name
}

// commitMessage is the message the dialog starts with: the agent's
// summary as airlock apply --commit makes it ("" when it cannot be read:
// the commit then makes its own).
func (p *promotePane) commitMessage() string {
	msg, err := p.svc.CommitMessage(p.id)
	if err != nil {
		return ""
	}
	return msg
}

// askCommit asks for the commit's message, then applies the approved
// changes and commits exactly the files written on the current branch.
func (p *promotePane) askCommit() {
	form, msg, _ := commitForm(false, p.commitMessage(),
		"The approved changes are written into the working tree (Undo takes them back; the commit stays) and committed on the current branch, with the trailers Airlock-Sandbox, Airlock-Agent and Airlock-Verify. Changes you staged yourself are refused: commit or unstage them first.")
	d := dialog.NewCustomConfirm("Apply and commit", "Apply and commit", "Cancel", form, func(ok bool) {
		if ok {
			p.applyAs(&promotion{message: msg.Text})
		}
	}, p.win)
	d.Show()
	p.win.Canvas().Focus(msg)
}

// askBranch asks for a new branch's name and the commit's message, then
// commits the approved changes on that branch from the baseline's
// commit, leaving the working tree and the index alone.
func (p *promotePane) askBranch() {
	form, msg, name := commitForm(true, p.commitMessage(),
		"The commit is made on a new branch from the commit the sandbox started from; your working tree, index and current branch are left as they are. Actions the agent asked for are not sent (an apply to the working tree sends them). Push it for review with airlock push.")
	var d *dialog.ConfirmDialog
	d = dialog.NewCustomConfirm("Commit on a new branch", "Commit", "Cancel", form, func(ok bool) {
		if !ok {
			return
		}
		branch := strings.TrimSpace(name.Text)
		if branch == "" {
			p.ev.say("Nothing committed: name the new branch.")
			return
		}
		p.applyAs(&promotion{message: msg.Text, branch: branch})
	}, p.win)
	d.Show()
	p.win.Canvas().Focus(name)
}

// commitDecided commits d as p asks: applied and committed, or on a new
// branch. leftOut names the files the user chose to leave out; with
// send, the approved actions are sent once the files are written and
// committed.
func (p *promotePane) commitDecided(d review.Decisions, leftOut []string, send bool, pm *promotion) {
	left := leftOutNote(leftOut)
	if !p.writesFiles(d) {
		p.applyBtn.Enable()
		p.ev.say("Nothing committed: no approved file is left." + left)
		return
	}
	copts := promote.CommitOptions{Message: pm.message, Branch: pm.branch}
	if pm.branch != "" {
		p.ev.say("Committing on " + safetext.Line(pm.branch) + "…")
	} else {
		p.ev.say("Applying and committing…")
	}
	p.async(func() {
		var res *sandbox.ApplyResult
		var cr *promote.CommitResult
		var err error
		if pm.branch != "" {
			cr, err = p.svc.Branch(context.Background(), p.id, d, copts)
		} else {
			res, cr, err = p.svc.ApplyCommit(context.Background(), p.id, d, sandbox.ApplyOptions{AllOrNothing: true}, copts)
		}
		fyne.Do(func() {
			p.applyBtn.Enable()
			p.committed(res, cr, err, left, send)
		})
	})
}

// committed shows how a commit went: the commit made, or why none was and
// what to do.
func (p *promotePane) committed(res *sandbox.ApplyResult, cr *promote.CommitResult, err error, left string, send bool) {
	changed := res != nil && len(res.Applied)+len(res.Merged) > 0
	defer func() {
		if changed || cr != nil {
			p.ev.reviewChanged()
		}
	}()
	switch {
	case res != nil && res.Held:
		n := len(res.Conflicts)
		p.ev.say(fmt.Sprintf("Nothing written or committed: %s with your edits. Apply to the working tree to choose for %s, then commit with git; or commit on a new branch, which starts from the sandbox's baseline.", plural(n, "1 file conflicts", fmt.Sprintf("%d files conflict", n)), plural(n, "it", "them")))
		return
	case err != nil && changed:
		// Written, but git refused the commit: the files stay applied.
		p.ev.say(applySummary(res) + " Not committed.")
		dialog.ShowError(fmt.Errorf("the files were written, but no commit was made: %w", commitAdvice(err)), p.win)
		return
	case err != nil:
		p.ev.say("Nothing written or committed.")
		dialog.ShowError(commitAdvice(err), p.win)
		return
	}
	done := commitSummary(cr)
	if res != nil {
		done = applySummary(res) + " " + done
	}
	p.ev.say(done + left)
	if send && res != nil {
		p.sendActions(done + left)
	}
}

// commitAdvice says what to do about a commit git or Airlock refused;
// the store's errors already say it for a dirty index and an existing
// branch.
func commitAdvice(err error) error {
	if errors.Is(err, promote.ErrNotGitRepo) {
		return fmt.Errorf("%w\n(a commit needs the project in a git repository: make it one, or choose Apply to the working tree)", err)
	}
	return err
}

// commitSummary says what commit was made.
func commitSummary(cr *promote.CommitResult) string {
	if cr == nil || cr.Commit == "" {
		return "No commit was made."
	}
	subject := safetext.Line(cr.Message.Subject)
	switch {
	case cr.NewBranch:
		return fmt.Sprintf("Committed %s %q on the new branch %s; your working tree is as it was. Push it for review with airlock push.", shortCommit(cr.Commit), subject, safetext.Line(cr.Branch))
	case cr.Branch == "":
		return fmt.Sprintf("Committed %s %q on a detached HEAD.", shortCommit(cr.Commit), subject)
	}
	return fmt.Sprintf("Committed %s %q on %s.", shortCommit(cr.Commit), subject, safetext.Line(cr.Branch))
}

// newApplyMenu is the button beside Apply that opens its menu.
func (p *promotePane) newApplyMenu() *widget.Button {
	b := widget.NewButtonWithIcon("", theme.MenuDropDownIcon(), p.showApplyMenu)
	b.Importance = widget.HighImportance
	return b
}
