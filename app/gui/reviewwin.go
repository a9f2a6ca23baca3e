package gui

import (
	"context"
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/review"
)

// ReviewWindow is the review of one sandbox. It composes panes that each
// own their widgets and state: the header (headPane), the file list
// (filesPane: filter, Flagged, folder verdicts), the diff of the file
// under the cursor (diffPane, with its comment boxes), the staged actions
// shown in the diff's place (actionsPane), the Transcript tab and Send
// back (roundsPane), the Comments tab (commentsPane), and Apply, its menu
// and Undo (promotePane, which opens the conflict window through
// conflictsPane). The panes share the review model (the decisions and the
// cursor) and tell the window what happened through small interfaces it
// implements (reviewwin_events.go); the window routes each event to the
// panes it concerns and keeps the status line, the tabs and the round
// selector.
type ReviewWindow struct {
	Window fyne.Window
	svc    ReviewService
	id     string
	// m is the review shown: full, or with roundOnly what the last round
	// changed.
	m *reviewModel

	header   *headPane
	files    *filesPane
	diff     *diffPane
	actions  *actionsPane
	rounds   *roundsPane
	comments *commentsPane
	promo    *promotePane
	status   *fitLabel
	tabs     *container.AppTabs

	// full is the whole review (every round against the snapshot); with
	// roundOnly set, m shows instead what the last round changed, read
	// only, and full waits.
	full      *reviewModel
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
}

// NewReviewWindow loads the sandbox's changeset, summary and transcript
// through svc and builds its review window (not shown).
func NewReviewWindow(a fyne.App, svc ReviewService, info sandbox.Info) (*ReviewWindow, error) {
	cs, err := svc.Changeset(context.Background(), info.ID)
	if err != nil {
		return nil, err
	}
	cs.Summarize(context.Background()) // what each change means, above its file
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
	// The held actions are reviewed beside the files; a sandbox whose
	// actions cannot be read is still reviewed (the status says why).
	actions, actionsErr := svc.Actions(info.ID)
	r := &ReviewWindow{svc: svc, id: info.ID, m: newReviewModel(cs), async: goAsync}
	r.confirm = func(title, message string, answer func(bool)) { dialog.ShowConfirm(title, message, answer, r.Window) }
	// A saved review whose verdicts no longer fit the changeset keeps
	// only its comments.
	if saved.Validate(cs) != nil {
		saved = saved.CarryVerdicts(nil, cs)
	}
	if saved.Files != nil || saved.Actions != nil {
		if saved.Files == nil {
			saved.Files = map[string]review.FileDecision{}
		}
		r.m.d = saved
	}
	r.m.setActions(actions)
	r.full, r.round = r.m, max(info.Round, 1)
	r.Window = a.NewWindow(fmt.Sprintf("Review %s: %s", info.ID, shortPath(info.Project)))
	stale, changed := staleNote(svc, info.ID)
	r.build(info, summary, transcript, stale, changed)
	if actionsErr != nil {
		r.status.SetText("Cannot show the actions the agent's requests left held: " + actionsErr.Error())
	}
	r.Window.Resize(fyne.NewSize(1100, 720))
	r.installKeys()
	r.Window.SetCloseIntercept(r.closeRequested)
	a.Settings().AddListener(func(fyne.Settings) { fyne.Do(r.diff.themeChanged) })
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

// build makes the panes and lays them out: the header above, the file
// list beside the tabs (the diff, the rationale, the transcript, the
// comments), the buttons, the status line and Send back's hint under
// them; then it shows the cursor's file, or the first action when no
// file changed. stale is the header's line about the baseline, changed
// the paths the user changed since.
func (r *ReviewWindow) build(info sandbox.Info, summary string, transcript []byte, stale string, changed map[string]bool) {
	r.files = newFilesPane(r.m, changed, r)
	side := r.files.content()

	r.diff = newDiffPane(r.m, r.Window, r.run, r)
	r.actions = newActionsPane(r.svc, r.id, r.full, r.diff, r.Window, r.run, r)
	r.diff.instead = r.actions.render

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
	r.comments = newCommentsPane(r.full, r)
	r.rounds = newRoundsPane(r.svc, r.id, r.round, r.full, transcript, r.Window, r.run, r)
	r.tabs = container.NewAppTabs(
		container.NewTabItemWithIcon("Changes", theme.DocumentIcon(), r.diff.content()),
		container.NewTabItemWithIcon("Rationale", theme.InfoIcon(), wheelScroll(container.NewScroll(rationale))),
		container.NewTabItemWithIcon("Transcript", theme.ListIcon(), r.rounds.transcriptTab()),
		container.NewTabItemWithIcon("Comments", theme.MailComposeIcon(), r.comments.content()),
	)
	r.rounds.tabs = r.tabs

	r.promo = newPromotePane(r.svc, r.id, info.Status, r.full, r.Window, r.run, r.ask, r.actions, newConflictsPane(r.svc, r.id, r.run, r), r)
	r.status = newFitLabel("", fyne.TextStyle{})
	sendNote := newFitLabel(sendBackHint, fyne.TextStyle{Italic: true})
	// The buttons keep their room; the status line takes what is left
	// and never widens the window (a long one ends at a word, whole in
	// its tip).
	bar := container.NewBorder(nil, nil,
		container.NewHBox(r.files.approveAll, r.files.rejectBtn, r.rounds.sendBtn, r.rounds.stopBtn, r.promo.undoBtn),
		container.NewHBox(r.promo.applyBtn, r.promo.applyMenu), r.status)
	// The header follows the sandbox (Reload).
	r.header = newHeadPane(r.svc, info, r)
	keys := widget.NewButton(keysHint, r.showKeys)
	keys.Importance = widget.LowImportance

	split := container.NewHSplit(side, r.tabs)
	split.Offset = 0.3
	var top fyne.CanvasObject = container.NewBorder(nil, nil, nil, keys, r.header.label)
	if r.round >= 2 {
		all, last := viewAll, fmt.Sprintf(viewRound, r.round)
		r.view = widget.NewSelect([]string{all, last}, func(s string) { r.ShowRound(s == last) })
		r.view.SetSelectedIndex(0)
		top = container.NewVBox(top, container.NewBorder(nil, nil, widget.NewLabel(fmt.Sprintf("Round %d. Show:", r.round)), nil, r.view))
	}
	top = r.header.rows(top, r.m.cs, stale)
	r.Window.SetContent(withTips(container.NewBorder(top, container.NewVBox(widget.NewSeparator(), bar, sendNote), nil, nil, split)))
	r.redraw()
	if f := r.m.current(); f != nil {
		r.files.selectRow(f.Path)
	}
	r.showFile()
	if r.m.current() == nil && len(r.m.actions) > 0 {
		// No file changed: what the agent asked to send is the review.
		r.selectAction(r.m.actions[0].ID)
	}
}

// SetPresets names agents in the header as the run dialog does.
func (r *ReviewWindow) SetPresets(presets []Preset) { r.header.setPresets(presets) }

// Reload reads the sandbox again and shows its state in the header (after
// an apply or an undo, or a change from elsewhere). A sandbox no longer
// listed leaves the header as it was.
func (r *ReviewWindow) Reload() {
	infos, err := r.svc.List()
	if err != nil {
		return
	}
	for _, info := range infos {
		if info.ID == r.id {
			r.header.setInfo(info)
			r.promo.setStatus(info.Status)
			return
		}
	}
}

// save keeps the decisions with the sandbox; a failure is shown, not
// fatal (Apply is given the decisions anyway).
func (r *ReviewWindow) save() { _ = r.saveErr() }

// saveErr is save, reporting the failure too.
func (r *ReviewWindow) saveErr() error {
	if r.roundOnly {
		return nil // a round's own changes are for reading; decisions are on the whole
	}
	err := r.svc.SaveDecisions(r.id, r.m.decisions())
	if err != nil {
		r.status.SetText("Could not save the review: " + err.Error())
	}
	return err
}

// refresh saves the decisions after a change and redraws.
func (r *ReviewWindow) refresh() {
	r.save()
	r.redraw()
}

// redraw redraws what depends on the decisions in every pane: the rows'
// marks, the summary, the file's state, the comments and Apply.
func (r *ReviewWindow) redraw() {
	r.files.redraw()
	r.diff.redraw()
	r.comments.refresh()
	r.promo.redraw()
}

// ShowFile selects a file of the changeset, if it has it.
func (r *ReviewWindow) ShowFile(path string) {
	if r.m.selectPath(path) {
		r.selectCurrent()
	}
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
		cs.Summarize(context.Background())
		r.save()
		r.m = newReviewModel(cs)
	} else {
		r.m = r.full
	}
	r.roundOnly = only
	r.m.action = 0 // the actions are the whole review's
	r.rounds.setReadOnly(only)
	r.promo.setModel(r.m, only)
	r.actions.setModel(r.m, only)
	r.diff.setModel(r.m, only)
	r.files.setModel(r.m, only)
	r.redraw()
	if f := r.m.current(); f != nil {
		r.files.selectRow(f.Path)
	}
	r.showFile()
}

// SendBack saves the review (its comments and rejections go to the agent)
// and sends the sandbox back with message for another round, its output
// live in a terminal tab; the window then says how the round ended, and
// the main window reloads.
func (r *ReviewWindow) SendBack(message string) { r.rounds.sendBack(message) }

// StopRound ends the Send back round that runs, if any: its VM is
// stopped and the round ends as failed.
func (r *ReviewWindow) StopRound() { r.rounds.stopRound() }
