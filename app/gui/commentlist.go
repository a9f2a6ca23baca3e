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

// commentsTab is the review window's Comments tab: every comment of the
// review with its file and lines and whether it is still to be sent,
// was sent in a round, or is resolved, as in a pull request's
// conversation. A click shows the comment's file.
type commentsTab struct {
	list  *widget.List
	count *widget.Label
	items []review.FileComment
}

// commentsTabContent builds the Comments tab.
func (r *ReviewWindow) commentsTabContent() fyne.CanvasObject {
	t := &commentsTab{count: widget.NewLabel("")}
	r.comments = t
	t.count.Wrapping = fyne.TextWrapWord
	t.list = widget.NewList(
		func() int { return len(t.items) },
		func() fyne.CanvasObject {
			where := widget.NewLabelWithStyle("path", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
			where.Truncation = fyne.TextTruncateEllipsis
			state := widget.NewLabelWithStyle("not sent yet", fyne.TextAlignTrailing, fyne.TextStyle{Italic: true})
			text := widget.NewLabel("text")
			text.Truncation = fyne.TextTruncateEllipsis
			return container.NewBorder(nil, nil, widget.NewIcon(theme.MailComposeIcon()), nil,
				container.NewVBox(container.NewBorder(nil, nil, nil, state, where), text))
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if i >= len(t.items) {
				return
			}
			c := t.items[i]
			row := o.(*fyne.Container)
			body, icon := row.Objects[0].(*fyne.Container), row.Objects[1].(*widget.Icon)
			head := body.Objects[0].(*fyne.Container)
			where, state := head.Objects[0].(*widget.Label), head.Objects[1].(*widget.Label)
			text := body.Objects[1].(*widget.Label)
			where.SetText(safetext.Line(c.Path) + " · " + c.Where())
			state.SetText(c.State())
			icon.SetResource(commentIcon(c.Comment))
			first, rest, _ := strings.Cut(strings.TrimSpace(c.Text), "\n")
			if rest != "" {
				first += " …"
			}
			text.SetText(safetext.Line(first))
		})
	t.list.OnSelected = func(i widget.ListItemID) {
		t.list.Unselect(i)
		if i < len(t.items) {
			r.showComment(t.items[i])
		}
	}
	r.refreshComments()
	return container.NewBorder(t.count, nil, nil, nil, t.list)
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

// refreshComments lists the review's comments again.
func (r *ReviewWindow) refreshComments() {
	t := r.comments
	if t == nil {
		return
	}
	d := r.full.decisions()
	d.MigrateLegacy(r.full.cs) // comments typed in the old boxes, until they are gone
	t.items = d.AllComments()
	pending, sent, resolved := 0, 0, 0
	for _, c := range t.items {
		switch {
		case c.Resolved:
			resolved++
		case c.Sent > 0:
			sent++
		default:
			pending++
		}
	}
	if len(t.items) == 0 {
		t.count.SetText("No comments yet. Comments on files and lines are listed here; Send back sends each once.")
	} else {
		t.count.SetText(fmt.Sprintf("%d %s: %d not sent yet, %d sent, %d resolved.", len(t.items), plural(len(t.items), "comment", "comments"), pending, sent, resolved))
	}
	t.list.Refresh()
}

// showComment shows the file a comment is on, in the Changes tab.
func (r *ReviewWindow) showComment(c review.FileComment) {
	if r.roundOnly {
		r.view.SetSelectedIndex(0) // comments are on the whole review
	}
	if r.full.cs.File(c.Path) == nil {
		r.status.SetText(safetext.Line(c.Path) + " is no longer changed: its comment stays in the list.")
		return
	}
	r.tabs.SelectIndex(0)
	r.ShowFile(c.Path)
}
