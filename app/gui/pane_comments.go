package gui

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// commentsPane is the review window's Comments tab: every comment of the
// review with its file and lines and whether it is still to be sent,
// was sent in a round, or is resolved, as in a pull request's
// conversation. A click shows the comment's file.
type commentsPane struct {
	full  *reviewModel // comments are the whole review's, whatever is shown
	ev    commentsEvents
	list  *widget.List
	count *widget.Label
	items []review.FileComment
}

// commentsEvents is what the Comments tab tells the window it is in.
type commentsEvents interface {
	// wholeReview shows the whole review, which the comments are on,
	// instead of a round's own changes.
	wholeReview()
	// commentsEdited follows a comment resolved or opened again: the
	// review is saved and shown again.
	commentsEdited()
	// commentDeleted follows comment i of file path deleted (a box
	// editing it is gone), as commentsEdited.
	commentDeleted(path string, i int)
	// showComment shows a comment in place in the Changes tab.
	showComment(c review.FileComment)
}

// newCommentsPane builds the Comments tab of the review full.
func newCommentsPane(full *reviewModel, ev commentsEvents) *commentsPane {
	p := &commentsPane{full: full, ev: ev, count: widget.NewLabel("")}
	p.count.Wrapping = fyne.TextWrapWord
	p.list = widget.NewList(
		func() int { return len(p.items) },
		func() fyne.CanvasObject {
			where := widget.NewLabelWithStyle("path", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
			where.Truncation = fyne.TextTruncateEllipsis
			state := widget.NewLabelWithStyle("not sent yet", fyne.TextAlignTrailing, fyne.TextStyle{Italic: true})
			text := widget.NewLabel("text")
			text.Truncation = fyne.TextTruncateEllipsis
			resolve := widget.NewButtonWithIcon("Resolve", theme.ConfirmIcon(), nil)
			del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), nil)
			resolve.Importance, del.Importance = widget.LowImportance, widget.LowImportance
			return container.NewBorder(nil, nil, widget.NewIcon(theme.MailComposeIcon()), container.NewHBox(resolve, del),
				container.NewVBox(container.NewBorder(nil, nil, nil, state, where), text))
		},
		p.updateRow)
	p.list.OnSelected = func(i widget.ListItemID) {
		p.list.Unselect(i)
		if i < len(p.items) {
			p.ev.showComment(p.items[i])
		}
	}
	p.refresh()
	return p
}

// content is the tab's content.
func (p *commentsPane) content() fyne.CanvasObject {
	return container.NewBorder(p.count, nil, nil, nil, wheelList(p.list))
}

// updateRow shows comment i in the row o.
func (p *commentsPane) updateRow(i widget.ListItemID, o fyne.CanvasObject) {
	if i >= len(p.items) {
		return
	}
	c := p.items[i]
	row := commentRowOf(o)
	row.where.SetText(safetext.Line(c.Path) + " · " + c.Where())
	row.state.SetText(c.State())
	row.icon.SetResource(commentIcon(c.Comment))
	first, rest, _ := strings.Cut(strings.TrimSpace(c.Text), "\n")
	if rest != "" {
		first += " …"
	}
	row.text.SetText(safetext.Line(first))
	// As on the comment in the diff: any comment can be resolved
	// or opened again; one not sent yet can be deleted.
	row.resolve.OnTapped = func() { p.resolve(c, !c.Resolved) }
	if c.Resolved {
		row.resolve.SetText("Reopen")
		row.resolve.SetIcon(theme.ContentUndoIcon())
	} else {
		row.resolve.SetText("Resolve")
		row.resolve.SetIcon(theme.ConfirmIcon())
	}
	row.del.OnTapped = func() { p.delete(c) }
	if c.Sent > 0 {
		row.del.Hide()
	} else {
		row.del.Show()
	}
}

// commentRow is what a row of the Comments tab holds.
type commentRow struct {
	icon               *widget.Icon
	where, state, text *widget.Label
	resolve, del       *widget.Button
}

// commentRowOf is the row the list's template made in o.
func commentRowOf(o fyne.CanvasObject) commentRow {
	row := o.(*fyne.Container)
	body, icon, buttons := row.Objects[0].(*fyne.Container), row.Objects[1].(*widget.Icon), row.Objects[2].(*fyne.Container)
	head := body.Objects[0].(*fyne.Container)
	return commentRow{
		icon:  icon,
		where: head.Objects[0].(*widget.Label), state: head.Objects[1].(*widget.Label), text: body.Objects[1].(*widget.Label),
		resolve: buttons.Objects[0].(*widget.Button), del: buttons.Objects[1].(*widget.Button),
	}
}

// resolve resolves (or opens again) a comment from the tab. Comments
// belong to the whole review: from a round's own view, the whole review
// is shown first.
func (p *commentsPane) resolve(c review.FileComment, resolved bool) {
	p.ev.wholeReview()
	p.full.resolveComment(c.Path, c.Index, resolved)
	p.ev.commentsEdited()
}

// delete deletes a comment not sent yet from the tab.
func (p *commentsPane) delete(c review.FileComment) {
	p.ev.wholeReview()
	if !p.full.deleteComment(c.Path, c.Index) {
		return
	}
	p.ev.commentDeleted(c.Path, c.Index)
}

// commentIcon marks a comment's state: to be sent, sent, resolved.
func commentIcon(c review.Comment) fyne.Resource {
	switch {
	case c.Resolved:
		return theme.NewSuccessThemedResource(theme.ConfirmIcon())
	case c.Sent > 0:
		return theme.MailSendIcon()
	}
	return theme.NewPrimaryThemedResource(theme.MailComposeIcon())
}

// refresh lists the review's comments again.
func (p *commentsPane) refresh() {
	d := p.full.decisions()
	d.MigrateLegacy(p.full.cs) // comments typed in the old boxes, until they are gone
	p.items = d.AllComments()
	pending, sent, resolved := 0, 0, 0
	for _, c := range p.items {
		switch {
		case c.Resolved:
			resolved++
		case c.Sent > 0:
			sent++
		default:
			pending++
		}
	}
	if len(p.items) == 0 {
		p.count.SetText("No comments yet. Comments on files and lines are listed here; Send back sends each once.")
	} else {
		p.count.SetText(fmt.Sprintf("%d %s: %d not sent yet, %d sent, %d resolved.", len(p.items), plural(len(p.items), "comment", "comments"), pending, sent, resolved))
	}
	p.list.Refresh()
}
