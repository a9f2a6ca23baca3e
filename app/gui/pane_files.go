package gui

import (
	"fmt"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/internal/safetext"
)

// filesPane is the review window's file list: the filter (and Flagged,
// when some file is flagged), the summary line, the list of folders,
// files and staged actions, and the buttons that approve or reject a
// folder's shown files or every file. It moves the model's cursor when
// a row is chosen; the window shows what the cursor is on.
type filesPane struct {
	m        *reviewModel
	readOnly bool
	ev       filesEvents

	list    *fileList
	filter  *fieldEntry
	flagged *widget.Check // shows only the flagged files; nil when none is
	summary *fitLabel
	// folder is the folder the folder buttons act on ("" for every shown
	// file): the selected folder row, or the selected file's folder.
	folder      string
	folderLabel *fitLabel
	folderBtns  []*widget.Button
	// approveAll and rejectBtn decide every file.
	approveAll, rejectBtn *widget.Button
	// changedHere are the files the user changed in the project since
	// the baseline (their rows are marked).
	changedHere map[string]bool
}

// filesEvents is what the file list tells the window it is in.
type filesEvents interface {
	// showFile shows the file under the cursor, which the list moved.
	showFile()
	// showAction shows staged action id, whose row was chosen.
	showAction(id int)
	// decideAction approves or rejects staged action id (its row's menu).
	decideAction(id int, approve bool)
	// refresh saves the decisions after a verdict and redraws them.
	refresh()
	// key handles a review key typed while the list has the focus.
	key(ch rune) bool
}

// newFilesPane builds the file list of the review m; changedHere are the
// paths the user changed since the baseline.
func newFilesPane(m *reviewModel, changedHere map[string]bool, ev filesEvents) *filesPane {
	p := &filesPane{m: m, changedHere: changedHere, ev: ev}
	p.list = newFileList(p)
	p.filter = newFieldEntry()
	p.filter.SetPlaceHolder("Filter paths  ( / )")
	p.filter.OnChanged = p.setFilter
	p.filter.onKey = func(ev *fyne.KeyEvent) bool {
		switch ev.Name {
		case fyne.KeyReturn, fyne.KeyEnter, fyne.KeyDown:
			// Done filtering: the keys walk what is shown.
			unfocus(p.filter)
			return true
		}
		return false
	}
	p.summary = newFitLabel(p.m.summary(), fyne.TextStyle{})
	p.summary.label.SizeName = theme.SizeNameCaptionText
	p.folderLabel = newFitLabel("", fyne.TextStyle{Italic: true})
	p.folderBtns = []*widget.Button{
		widget.NewButtonWithIcon("Approve", theme.ConfirmIcon(), func() { p.setFolderVerdict(p.folder, true) }),
		widget.NewButtonWithIcon("Reject", theme.CancelIcon(), func() { p.setFolderVerdict(p.folder, false) }),
	}
	for _, b := range p.folderBtns {
		b.Importance = widget.LowImportance
	}
	if p.m.cs.SecondLook().Files > 0 {
		p.flagged = widget.NewCheck("Flagged", p.setFlagged)
	}
	p.rejectBtn = widget.NewButtonWithIcon("Reject all", theme.CancelIcon(), func() { p.setAll(false) })
	p.approveAll = widget.NewButtonWithIcon("Approve all", theme.ConfirmIcon(), func() { p.setAll(true) })
	return p
}

// content is the list's side of the window: the filter and the summary
// above the list, the folder buttons under it.
func (p *filesPane) content() fyne.CanvasObject {
	folderBar := container.NewBorder(nil, nil, nil, container.NewHBox(p.folderBtns[0], p.folderBtns[1]), p.folderLabel)
	var filterRow fyne.CanvasObject = p.filter
	if p.flagged != nil {
		filterRow = container.NewBorder(nil, nil, nil, p.flagged, p.filter)
	}
	return container.NewBorder(container.NewVBox(filterRow, p.summary), folderBar, nil, nil,
		withWheel(p.list, p.list.wheel))
}

// setModel lists the review m (the whole review, or what the last round
// changed), with the filter and Flagged as they are; read only, its
// verdict buttons are off.
func (p *filesPane) setModel(m *reviewModel, readOnly bool) {
	p.m, p.readOnly = m, readOnly
	m.flagged = p.flagged != nil && p.flagged.Checked
	m.setFilter(p.filter.Text)
	for _, b := range []*widget.Button{p.rejectBtn, p.approveAll, p.folderBtns[0], p.folderBtns[1]} {
		if readOnly {
			b.Disable()
		} else {
			b.Enable()
		}
	}
	p.list.rebuild()
}

// redraw shows the decisions again: the rows' marks, the summary and
// the folder buttons' files.
func (p *filesPane) redraw() {
	p.list.Refresh()
	p.summary.SetText(p.m.summary())
	p.showFolder()
}

// selectRow selects the row of a file, folder or action (id) as a click
// does.
func (p *filesPane) selectRow(id string) { p.list.Select(id) }

// scrollTo brings the row of id into view.
func (p *filesPane) scrollTo(id string) { p.list.ScrollTo(id) }

// relist lists the rows again (the actions were read again).
func (p *filesPane) relist() {
	p.list.fill()
	p.list.Refresh()
}

// focusFilter puts the focus on the filter, in c.
func (p *filesPane) focusFilter(c fyne.Canvas) { c.Focus(p.filter) }

// clearFilter empties the filter, if it has text: every file is shown
// again.
func (p *filesPane) clearFilter() {
	if p.filter.Text != "" {
		p.filter.SetText("") // OnChanged shows every file again
	}
}

// flaggedOnly lists only the flagged files (Flagged ticked), if any is.
func (p *filesPane) flaggedOnly() {
	if p.flagged != nil {
		p.flagged.SetChecked(true) // OnChanged filters the list
	}
}

// setFolder makes folder (a tree ID, "" for every shown file) the one the
// folder buttons act on.
func (p *filesPane) setFolder(folder string) {
	p.folder = folder
	p.showFolder()
}

// showFolder says which files the folder buttons act on.
func (p *filesPane) showFolder() {
	if p.folderLabel == nil {
		return
	}
	fs := p.m.under(p.folder)
	what := "Folder " + safetext.Line(p.folder)
	if p.folder == "" {
		what = "All shown"
		if !p.m.filtered() {
			what = "All"
		}
	}
	p.folderLabel.SetText(fmt.Sprintf("%s (%d %s):", what, len(fs), plural(len(fs), "file", "files")))
}

// setFolderVerdict approves or rejects every shown file of folder.
func (p *filesPane) setFolderVerdict(folder string, approve bool) {
	if p.readOnly {
		return
	}
	p.m.setFiles(p.m.under(folder), approve)
	p.ev.refresh()
	p.ev.showFile()
}

// setAll approves or rejects every file.
func (p *filesPane) setAll(approve bool) {
	p.m.setAll(approve)
	p.ev.refresh()
	p.ev.showFile()
}

// setFilter shows only the files whose path contains q.
func (p *filesPane) setFilter(q string) {
	p.refilter(func() { p.m.setFilter(q) })
}

// setFlagged shows only the flagged files, or with false every file the
// filter shows.
func (p *filesPane) setFlagged(on bool) {
	p.refilter(func() { p.m.setFlagged(on) })
}

// refilter changes what the list shows with change, then shows it.
func (p *filesPane) refilter(change func()) {
	before := p.m.current()
	change()
	p.list.rebuild()
	if p.folder != "" && len(p.m.under(p.folder)) == 0 {
		p.folder = ""
	}
	p.showFolder()
	p.summary.SetText(p.m.summary())
	f := p.m.current()
	if f == nil {
		return // nothing matches: the last file stays in view
	}
	p.list.Select(f.Path)
	if f != before {
		p.ev.showFile()
	}
}
