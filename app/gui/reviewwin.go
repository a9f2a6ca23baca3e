package gui

import (
	"context"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// ReviewWindow is the review of one sandbox: the file tree, the diff of
// the selected file with a toggle and a comment per hunk, the agent's
// rationale and transcript, and apply / undo.
type ReviewWindow struct {
	Window fyne.Window
	svc    Service
	id     string
	m      *reviewModel

	tree      *widget.Tree
	treeIDs   tree
	diff      *fyne.Container
	diffScrl  *container.Scroll
	hunkBoxes []fyne.CanvasObject
	hunkCheck []*widget.Button // each hunk's verdict: a tap flips it
	approved  *widget.List
	rejected  *widget.List
	// toApproved and toRejected move the file selected in one list to the
	// other (fyne has no drag and drop between widgets).
	toApproved *widget.Button
	toRejected *widget.Button
	taken      []*review.File
	left       []*review.File
	pickTaken  int
	pickLeft   int
	status     *widget.Label
	applyBtn   *widget.Button
	rejectBtn  *widget.Button
	approveAll *widget.Button
	sendBtn    *widget.Button
	undoBtn    *widget.Button
	// stopBtn ends a Send back round while it runs (stopRound cancels
	// it; nil when none runs).
	stopBtn   *widget.Button
	stopRound context.CancelFunc
	tabs      *container.AppTabs
	fileState *widget.Label   // the shown file's state
	stale     *widget.Label   // the baseline is behind the project; nil when it is not
	fileHead  *fyne.Container // its row, laid out again when the state changes
	dv        diffState       // the diff pane's (hunkview.go)

	// full is the whole review (every round against the snapshot); with
	// roundOnly set, m shows instead what the last round changed, read
	// only, and full waits.
	full      *reviewModel
	fullTree  tree
	roundOnly bool
	round     int            // the sandbox's round (1 before any reply)
	view      *widget.Select // all changes or the last round's; nil for round 1

	// onChange, if set, is told after an apply or undo (the main window
	// refreshes its list).
	onChange func()
	// onRound, if set, is told when a reply round is ready (the main
	// window opens the review again on the new round).
	onRound func()
	// async runs apply and undo off fyne's goroutine.
	async func(func())
	// confirm asks a yes/no question and calls answer with the reply: a
	// dialog on the window (tests set their own).
	confirm func(title, message string, answer func(bool))

	// rounds is the Transcript tab and a Send back round's terminal;
	// comments the Comments tab.
	rounds   *roundsTab
	comments *commentsTab
}

// NewReviewWindow loads the sandbox's changeset, summary and transcript
// through svc and builds its review window (not shown).
func NewReviewWindow(a fyne.App, svc Service, info sandbox.Info) (*ReviewWindow, error) {
	cs, err := svc.Changeset(context.Background(), info.ID)
	if err != nil {
		return nil, err
	}
	summary, err := svc.Summary(info.ID)
	if err != nil {
		return nil, err
	}
	transcript, err := svc.Transcript(info.ID)
	if err != nil {
		return nil, err
	}
	saved, err := svc.Decisions(info.ID)
	if err != nil {
		return nil, err
	}
	r := &ReviewWindow{svc: svc, id: info.ID, m: newReviewModel(cs), treeIDs: newTree(cs), pickTaken: -1, pickLeft: -1, async: goAsync}
	r.confirm = func(title, message string, answer func(bool)) { dialog.ShowConfirm(title, message, answer, r.Window) }
	// A saved review whose verdicts no longer fit the changeset keeps
	// only its comments.
	if saved.Validate(cs) != nil {
		saved = saved.CarryVerdicts(nil, cs)
	}
	if saved.Files != nil {
		r.m.d = saved
	}
	r.full, r.fullTree, r.round = r.m, r.treeIDs, max(info.Round, 1)
	r.Window = a.NewWindow(fmt.Sprintf("Review %s: %s", info.ID, shortPath(info.Project)))
	r.build(info, summary, transcript, staleNote(svc, info.ID))
	r.Window.Resize(fyne.NewSize(1100, 720))
	r.installKeys()
	r.Window.SetCloseIntercept(r.closeRequested)
	return r, nil
}

// closeRequested closes the window when the user asks to, keeping the
// review; a round running from this window, which has no other way to
// be stopped, ends with it.
func (r *ReviewWindow) closeRequested() {
	r.save()
	r.StopRound()
	r.Window.Close()
}

func (r *ReviewWindow) build(info sandbox.Info, summary string, transcript []byte, stale string) {
	r.tree = widget.NewTree(
		func(id widget.TreeNodeID) []widget.TreeNodeID { return r.treeIDs.children[id] },
		func(id widget.TreeNodeID) bool { return id == "" || isFolder(id) },
		func(branch bool) fyne.CanvasObject {
			return container.NewHBox(widget.NewIcon(theme.FolderIcon()), widget.NewIcon(nil), widget.NewLabel("M"), widget.NewLabel("name"), widget.NewIcon(nil))
		},
		r.updateTreeNode,
	)
	r.tree.OnSelected = func(id widget.TreeNodeID) {
		if isFolder(id) {
			return
		}
		if r.m.selectPath(id) {
			r.showFile()
		}
	}
	r.tree.OpenAllBranches()

	r.approved = widget.NewList(func() int { return len(r.taken) }, func() fyne.CanvasObject { return widget.NewLabel("file") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			o.(*widget.Label).SetText(safetext.Line(r.taken[i].Path))
		})
	r.rejected = widget.NewList(func() int { return len(r.left) }, func() fyne.CanvasObject { return widget.NewLabel("file") },
		func(i widget.ListItemID, o fyne.CanvasObject) {
			o.(*widget.Label).SetText(safetext.Line(r.left[i].Path) + " (" + r.m.fileState(r.left[i]).String() + ")")
		})
	r.approved.OnSelected = func(i widget.ListItemID) { r.pickTaken = i }
	r.rejected.OnSelected = func(i widget.ListItemID) { r.pickLeft = i }
	r.toRejected = widget.NewButtonWithIcon("Reject", theme.MoveDownIcon(), func() {
		if r.pickTaken >= 0 && r.pickTaken < len(r.taken) {
			r.m.setFile(r.taken[r.pickTaken], false)
			r.refresh()
		}
	})
	r.toApproved = widget.NewButtonWithIcon("Approve", theme.MoveUpIcon(), func() {
		if r.pickLeft >= 0 && r.pickLeft < len(r.left) {
			r.m.setFile(r.left[r.pickLeft], true)
			r.refresh()
		}
	})
	lists := container.NewVSplit(
		container.NewBorder(widget.NewLabelWithStyle("Approved: will be applied", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), nil, nil, nil, r.approved),
		container.NewBorder(container.NewVBox(container.NewHBox(r.toApproved, r.toRejected),
			widget.NewLabelWithStyle("Not approved: left out", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})), nil, nil, nil, r.rejected),
	)
	side := container.NewAppTabs(
		container.NewTabItem("Files", r.tree),
		container.NewTabItem("Approved / Rejected", lists),
	)

	diffPane := r.newDiffPane()

	shown := plainTranscript(transcript)
	var rationale fyne.CanvasObject
	if strings.TrimSpace(summary) != "" {
		md := widget.NewRichTextFromMarkdown(safetext.Text(summary))
		md.Wrapping = fyne.TextWrapWord
		rationale = md
	} else {
		// No summary: the agent's final message is the end of what it
		// printed.
		note := widget.NewLabel("The agent wrote no summary (it may write one to .airlock/summary.md). Its last output:")
		note.Wrapping = fyne.TextWrapWord
		rationale = container.NewVBox(note, widget.NewLabelWithStyle(lastLines(shown, 20), fyne.TextAlignLeading, fyne.TextStyle{Monospace: true}))
	}
	r.tabs = container.NewAppTabs(
		container.NewTabItemWithIcon("Changes", theme.DocumentIcon(), diffPane),
		container.NewTabItemWithIcon("Rationale", theme.InfoIcon(), container.NewScroll(rationale)),
		container.NewTabItemWithIcon("Transcript", theme.ListIcon(), r.transcriptTab(transcript)),
		container.NewTabItemWithIcon("Comments", theme.MailComposeIcon(), r.commentsTabContent()),
	)

	r.applyBtn = widget.NewButtonWithIcon("Apply selected", theme.ConfirmIcon(), r.apply)
	r.applyBtn.Importance = widget.HighImportance
	r.rejectBtn = widget.NewButtonWithIcon("Reject all", theme.CancelIcon(), func() { r.m.setAll(false); r.refresh(); r.showFile() })
	r.approveAll = widget.NewButtonWithIcon("Approve all", theme.ConfirmIcon(), func() { r.m.setAll(true); r.refresh(); r.showFile() })
	r.sendBtn = widget.NewButtonWithIcon("Send back to agent", theme.MailReplyIcon(), r.askSendBack)
	r.undoBtn = widget.NewButtonWithIcon("Undo last apply", theme.ContentUndoIcon(), r.undo)
	r.stopBtn = widget.NewButtonWithIcon("Stop the round", theme.MediaStopIcon(), r.StopRound)
	r.stopBtn.Hide()
	r.status = widget.NewLabel("")
	r.status.Truncation = fyne.TextTruncateEllipsis
	sendNote := widget.NewLabelWithStyle(sendBackHint, fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	bar := container.NewBorder(nil, nil,
		container.NewHBox(r.approveAll, r.rejectBtn, r.sendBtn, r.stopBtn, r.undoBtn),
		r.applyBtn, r.status)
	headText := fmt.Sprintf("%s  ·  %s  ·  %s", shortPath(info.Project), commandOf(info.Meta), statusText(info))
	if info.Verify != nil {
		headText += "  ·  verify " + info.Verify.String()
	}
	head := widget.NewLabelWithStyle(headText,
		fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	// A long command line must not widen the window past the screen
	// (its action bar with it).
	head.Truncation = fyne.TextTruncateEllipsis
	keys := widget.NewLabelWithStyle("Keys: j/k hunk · n/p file · a/r approve/reject hunk · A/R file · Ctrl+Enter apply", fyne.TextAlignTrailing, fyne.TextStyle{Italic: true})

	split := container.NewHSplit(side, r.tabs)
	split.Offset = 0.3
	var top fyne.CanvasObject = container.NewBorder(nil, nil, nil, keys, head)
	if r.round >= 2 {
		all, last := viewAll, fmt.Sprintf(viewRound, r.round)
		r.view = widget.NewSelect([]string{all, last}, func(s string) { r.ShowRound(s == last) })
		r.view.SetSelectedIndex(0)
		top = container.NewVBox(top, container.NewBorder(nil, nil, widget.NewLabel(fmt.Sprintf("Round %d. Show:", r.round)), nil, r.view))
	}
	if stale != "" {
		r.stale = widget.NewLabelWithStyle(stale, fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
		r.stale.Importance = widget.WarningImportance
		r.stale.Wrapping = fyne.TextWrapWord
		top = container.NewVBox(top, container.NewBorder(nil, nil, widget.NewIcon(theme.WarningIcon()), nil, r.stale))
	}
	r.Window.SetContent(container.NewBorder(top, container.NewVBox(widget.NewSeparator(), bar, sendNote), nil, nil, split))
	r.redraw()
	if f := r.m.current(); f != nil {
		r.tree.Select(f.Path)
	}
	r.showFile()
}

func (r *ReviewWindow) updateTreeNode(id widget.TreeNodeID, branch bool, o fyne.CanvasObject) {
	box := o.(*fyne.Container)
	icon, verdict, mark, name := box.Objects[0].(*widget.Icon), box.Objects[1].(*widget.Icon), box.Objects[2].(*widget.Label), box.Objects[3].(*widget.Label)
	warn := box.Objects[4].(*widget.Icon)
	warn.Hide()
	if branch {
		icon.SetResource(theme.FolderOpenIcon())
		verdict.Hide()
		mark.Hide()
		name.SetText(safetext.Line(strings.TrimSuffix(id[strings.LastIndex(strings.TrimSuffix(id, "/"), "/")+1:], "/")) + "/")
		return
	}
	f := r.m.cs.File(id)
	if f == nil {
		return
	}
	icon.SetResource(statusIcon(f))
	verdict.SetResource(verdictIcon(r.m.fileState(f)))
	verdict.Show()
	mark.SetText(statusLetter(f))
	mark.Show()
	label := safetext.Line(id[strings.LastIndex(id, "/")+1:])
	if f.Status == review.Renamed {
		label += "  (was " + safetext.Line(f.OldPath) + ")"
	}
	if f.HasFlag(review.FlagControl) {
		label += "  ⚠"
	}
	if f.HasFlag(review.FlagHostExec) {
		// Files that run on the user's machine: a warning sign after
		// the name (the reason is in the file's header).
		warn.SetResource(theme.NewWarningThemedResource(theme.WarningIcon()))
		warn.Show()
	}
	name.SetText(label)
}

// statusIcon is the tree's icon for a change.
func statusIcon(f *review.File) fyne.Resource {
	switch {
	case f.Binary:
		return theme.FileImageIcon()
	case f.Status == review.Added:
		return theme.ContentAddIcon()
	case f.Status == review.Deleted:
		return theme.DeleteIcon()
	case f.Status == review.Renamed:
		return theme.ContentRedoIcon()
	case f.Status == review.ModeChanged:
		return theme.SettingsIcon()
	case f.Status == review.TypeChanged:
		return theme.ViewRefreshIcon()
	}
	return theme.DocumentCreateIcon()
}

// verdictIcon shows a file's state in the tree: an empty circle while
// undecided, a green tick, a half mark, a red cross.
func verdictIcon(s fileState) fyne.Resource {
	switch s {
	case stateApproved:
		return theme.NewSuccessThemedResource(theme.ConfirmIcon())
	case statePartial:
		return theme.NewWarningThemedResource(theme.ContentRemoveIcon())
	case stateRejected:
		return theme.NewErrorThemedResource(theme.CancelIcon())
	}
	return theme.RadioButtonIcon()
}

// save keeps the decisions with the sandbox; a failure is shown, not
// fatal (Apply is given the decisions anyway).
func (r *ReviewWindow) save() {
	if r.roundOnly {
		return // a round's own changes are for reading; decisions are on the whole
	}
	if err := r.svc.SaveDecisions(r.id, r.m.decisions()); err != nil {
		r.status.SetText("Could not save the review: " + err.Error())
	}
}

// refresh saves the decisions after a change and redraws.
func (r *ReviewWindow) refresh() {
	r.save()
	r.redraw()
}

// redraw redraws what depends on the decisions: the tree marks, the two
// lists, the file's state and the apply button.
func (r *ReviewWindow) redraw() {
	r.taken, r.left = r.m.approved()
	r.pickTaken, r.pickLeft = -1, -1
	r.approved.UnselectAll()
	r.rejected.UnselectAll()
	r.approved.Refresh()
	r.rejected.Refresh()
	r.tree.Refresh()
	if f := r.m.current(); f != nil && r.fileState != nil {
		r.fileState.SetText(r.m.fileState(f).String())
		r.fileHead.Refresh()
	}
	r.refreshComments()
	r.applyBtn.SetText(fmt.Sprintf("Apply selected (%d %s)", len(r.taken), plural(len(r.taken), "file", "files")))
	if len(r.taken) == 0 || r.roundOnly {
		r.applyBtn.Disable()
	} else {
		r.applyBtn.Enable()
	}
}

// ShowFile selects a file of the changeset, if it has it.
func (r *ReviewWindow) ShowFile(path string) {
	if r.m.selectPath(path) {
		r.selectCurrent()
	}
}

// selectCurrent shows the cursor's file in the tree and the diff.
func (r *ReviewWindow) selectCurrent() {
	f := r.m.current()
	if f == nil {
		return
	}
	hunk := r.m.hunk
	r.tree.Select(f.Path) // OnSelected resets the hunk
	r.tree.ScrollTo(f.Path)
	r.m.hunk = hunk
	r.showFile()
}

// installKeys binds the review keys on the window's canvas; they act when
// no entry has the focus.
func (r *ReviewWindow) installKeys() {
	c := r.Window.Canvas()
	c.SetOnTypedRune(func(ch rune) { r.key(ch) })
	c.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyReturn, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) { r.apply() })
}

// key handles one review key.
func (r *ReviewWindow) key(ch rune) {
	f := r.m.current()
	switch ch {
	case 'j':
		r.m.moveHunk(1)
	case 'k':
		r.m.moveHunk(-1)
	case 'n':
		r.m.moveFile(1)
	case 'p':
		r.m.moveFile(-1)
	case 'a', 'r':
		if f == nil {
			return
		}
		if len(f.Hunks) == 0 {
			r.m.setFile(f, ch == 'a')
		} else {
			r.m.setHunk(f, r.m.hunk, ch == 'a')
		}
		r.refresh()
	case 'A', 'R':
		if f == nil {
			return
		}
		r.m.setFile(f, ch == 'A')
		r.refresh()
	default:
		return
	}
	r.selectCurrent()
}

// The choices of the round selector.
const (
	viewAll   = "All changes since the snapshot (what Apply writes)"
	viewRound = "Only what round %d changed (read only)"
)

// ShowRound shows what the last round changed over the round before it
// (read only), or with false the whole review again.
func (r *ReviewWindow) ShowRound(only bool) {
	if only == r.roundOnly || r.round < 2 {
		return
	}
	if only {
		cs, err := r.svc.RoundChangeset(context.Background(), r.id, r.round)
		if err != nil {
			r.status.SetText("Cannot show the last round: " + err.Error())
			r.view.SetSelectedIndex(0)
			return
		}
		r.save()
		r.m, r.treeIDs = newReviewModel(cs), newTree(cs)
	} else {
		r.m, r.treeIDs = r.full, r.fullTree
	}
	r.roundOnly = only
	for _, b := range []*widget.Button{r.rejectBtn, r.approveAll, r.sendBtn, r.toApproved, r.toRejected} {
		if only {
			b.Disable()
		} else {
			b.Enable()
		}
	}
	r.tree.Refresh()
	r.tree.OpenAllBranches()
	r.redraw()
	if f := r.m.current(); f != nil {
		r.tree.Select(f.Path)
	}
	r.showFile()
}

// staleNote is the review window's line about a baseline the project has
// moved on from ("" when it has not). The review goes on when the project
// cannot be compared (moved away, unreadable): the line says so.
func staleNote(svc Service, id string) string {
	st, err := svc.Staleness(context.Background(), id)
	if err != nil {
		return "Cannot compare the project with the baseline: " + err.Error()
	}
	if st.Behind() == 0 {
		return ""
	}
	s := st.String()
	return strings.ToUpper(s[:1]) + s[1:] + ". Applying merges the agent's changes into your edits three ways; if a file conflicts, nothing is written until you choose for it."
}
