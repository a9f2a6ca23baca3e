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
			resolve := widget.NewButtonWithIcon("Resolve", theme.ConfirmIcon(), nil)
			del := widget.NewButtonWithIcon("Delete", theme.DeleteIcon(), nil)
			resolve.Importance, del.Importance = widget.LowImportance, widget.LowImportance
			return container.NewBorder(nil, nil, widget.NewIcon(theme.MailComposeIcon()), container.NewHBox(resolve, del),
				container.NewVBox(container.NewBorder(nil, nil, nil, state, where), text))
		},
		func(i widget.ListItemID, o fyne.CanvasObject) {
			if i >= len(t.items) {
				return
			}
			c := t.items[i]
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
			row.resolve.OnTapped = func() { r.resolveListed(c, !c.Resolved) }
			if c.Resolved {
				row.resolve.SetText("Reopen")
				row.resolve.SetIcon(theme.ContentUndoIcon())
			} else {
				row.resolve.SetText("Resolve")
				row.resolve.SetIcon(theme.ConfirmIcon())
			}
			row.del.OnTapped = func() { r.deleteListed(c) }
			if c.Sent > 0 {
				row.del.Hide()
			} else {
				row.del.Show()
			}
		})
	t.list.OnSelected = func(i widget.ListItemID) {
		t.list.Unselect(i)
		if i < len(t.items) {
			r.showComment(t.items[i])
		}
	}
	r.refreshComments()
	return container.NewBorder(t.count, nil, nil, nil, wheelList(t.list))
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

// resolveListed resolves (or opens again) a comment from the Comments
// tab. Comments belong to the whole review: from a round's own view, the
// whole review is shown first.
func (r *ReviewWindow) resolveListed(c review.FileComment, resolved bool) {
	if r.roundOnly {
		r.view.SetSelectedIndex(0)
	}
	r.m.resolveComment(c.Path, c.Index, resolved)
	r.refresh()
	r.render(false)
}

// deleteListed deletes a comment not sent yet from the Comments tab.
func (r *ReviewWindow) deleteListed(c review.FileComment) {
	if r.roundOnly {
		r.view.SetSelectedIndex(0)
	}
	if !r.m.deleteComment(c.Path, c.Index) {
		return
	}
	// A comment being edited in the diff is this one (gone) or moves up.
	if d := r.dv.draft; d != nil && d.path == c.Path && d.index >= c.Index {
		if d.index == c.Index {
			r.dv.draft = nil
		} else {
			d.index--
		}
	}
	r.refresh()
	r.render(false)
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

// showComment shows a comment in place in the Changes tab, its lines
// unfolded.
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
	r.revealComment(c.Path, c.Index)
}
